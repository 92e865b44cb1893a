# A module built for another Samba release refuses the tree connect (issue
# #23): the samba422 stage runs this with IOTUNE_FOREIGN_MODULE naming the
# iotune.so built for the other release (the 4.17 one inside the Debian
# 13 chroot, the 4.22 one on the Debian 12 host).  Marked samba_versions:
# it replaces the installed module for a moment, so no other stage runs it.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import shutil
import subprocess

import pytest

import harness
from conftest import start_smbd

FOREIGN = os.environ.get('IOTUNE_FOREIGN_MODULE', '')

pytestmark = [
    pytest.mark.samba_versions,
    pytest.mark.skipif(not os.path.isfile(FOREIGN),
                       reason='IOTUNE_FOREIGN_MODULE names no module '
                       '(the samba422 stage sets it)'),
]


@pytest.fixture
def foreign_module(request):
    """the other release's iotune.so where smbd loads iotune from, until
    the test ends"""
    target = harness.module_path()
    shutil.copyfile(FOREIGN, target + '.tmp')
    os.rename(target + '.tmp', target)
    request.addfinalizer(harness.install_module)
    return target


def test_module_for_another_samba_refuses_tree_connect(request,
                                                       foreign_module):
    smbd = start_smbd(request, {'iot': {'vfs objects': 'iotune'},
                                'plain': {}})
    version = subprocess.run(['smbd', '-V'], capture_output=True,
                             text=True).stdout.strip()
    r = harness.smbclient(smbd, 'iot', 'ls', check=False)
    assert r.returncode != 0, r.stdout
    assert harness.smbclient(smbd, 'plain', 'ls').returncode == 0
    log = smbd.log_text()
    print('%s, a module built for the other release: %s' %
          (version, [line.strip() for line in log.splitlines()
                     if 'iotune' in line][:3]))
    # the dynamic linker names the other release's library, or iotune's
    # own check names both versions
    assert ('iotune was built for smbd' in log or
            ('iotune.so' in log and 'cannot open shared object' in log))
