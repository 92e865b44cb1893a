# The sanitize stage's proof that it can fail: the test-only fault module,
# built with AddressSanitizer like iotune.so, writes one byte past a heap
# buffer when told to, inside a real smbd; the report must reach the
# stage's report directory (preload, log_path and smbd's children all
# work).  The report is then moved aside, so that only reports of the
# tests that follow fail the stage.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import os
import shutil
import time

import pytest

import harness
from conftest import start_smbd

pytestmark = pytest.mark.sanitize

REPORTS = os.environ.get('IOTUNE_SANITIZE_REPORTS', '')


@pytest.fixture(scope='module')
def smbd(request):
    if not REPORTS:
        pytest.skip('runs in the sanitize stage (scripts/sanitize.sh run)')
    control = os.path.join(harness.scratch_dir('sanitize-'), 'control')
    open(control, 'w').close()
    s = start_smbd(request, {
        'fault': {'vfs objects': 'iotune iotune_fault',
                  'iotune_fault:control': control},
    })
    s.control = control
    return s


def test_a_heap_overflow_in_smbd_is_reported(smbd):
    before = set(glob.glob(os.path.join(REPORTS, '*')))
    with open(smbd.control, 'w') as f:
        f.write('canary\n')
    path = os.path.join(smbd.share_path('fault'), 'canary.bin')
    src = os.path.join(smbd.workdir, 'canary-src.bin')
    with open(src, 'wb') as f:
        f.write(b'c' * 4096)
    harness.smbclient(smbd, 'fault', 'put %s canary.bin' % src)
    found = []
    deadline = time.monotonic() + 10
    while not found and time.monotonic() < deadline:
        for report in set(glob.glob(os.path.join(REPORTS, '*'))) - before:
            with open(report, errors='replace') as f:
                text = f.read()
            if 'heap-buffer-overflow' in text and 'fault_canary' in text:
                found.append((report, text))
        time.sleep(0.2)
    aside = os.path.join(os.path.dirname(REPORTS), 'canary-reports')
    os.makedirs(aside, exist_ok=True)
    for report, text in found:
        shutil.move(report, aside)
    print('canary report: %s' % (found[0][1].splitlines()[1:4]
                                 if found else 'none'))
    assert found, 'no AddressSanitizer report of the canary in %s' % REPORTS
    assert os.path.getsize(path) == 4096   # smbd went on (recover mode)
