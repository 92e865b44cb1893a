# pytest fixtures: one real smbd per test module, stopped by PID even when
# tests fail; its work dir (smb.conf, log.smbd) is kept when a test failed.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import harness  # noqa: E402

# The shares most tests use: identical but for iotune.
PLAIN = {'vfs objects': 'streams_xattr'}
IOTUNE = {'vfs objects': 'iotune streams_xattr'}


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'glusterfs: needs a GlusterFS volume (the glusterfs '
        'stage of tests/run_all.py)')
    config.addinivalue_line(
        'markers', 'cluster: needs a two-node CTDB cluster (the cluster '
        'stage of tests/run_all.py)')
    config.addinivalue_line(
        'markers', 'samba_versions: a module built for another Samba '
        'release (the samba422 stage of tests/run_all.py)')
    config.addinivalue_line(
        'markers', 'sanitize: checks of the sanitize stage itself '
        '(scripts/sanitize.sh run)')
    config.addinivalue_line(
        'markers', 'package: builds, installs and removes the Debian '
        'package (the package stage of tests/run_all.py)')


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item.session.iotune_failed = True
        smbd = getattr(item.module, 'CURRENT_SMBD', None)
        if smbd is not None:
            report.sections.append(('smbd log (%s)' % smbd.log,
                                    smbd.log_tail(60)))


@pytest.fixture(scope='session', autouse=True)
def installed_module():
    return harness.install_module()


def start_smbd(request, shares, **kwargs):
    workdir = harness.scratch_dir(request.module.__name__ + '-')
    smbd = harness.Smbd(workdir, shares, **kwargs)
    smbd.start()
    request.module.CURRENT_SMBD = smbd

    def finish():
        smbd.stop()
        if getattr(request.session, 'iotune_failed', False):
            print('\nkept smbd work dir for the failed run: %s' % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    request.addfinalizer(finish)
    return smbd
