#!/usr/bin/python3
# Runs iotune's test stages and prints one summary line at the end.
#   unit         cmocka tests of the core (build/tests/unit/test_*)
#   fuzz         libFuzzer targets of the core (tests/fuzz), bounded runs
#   integration  pytest against a real smbd (tests/integration)
#   package      builds the Debian package, installs it, loads the packaged
#                module in a real smbd, removes and purges it
#   glusterfs    pytest against a real smbd over a GlusterFS volume
#                (vfs_glusterfs), which the stage sets up and tears down
#   cluster      pytest against a two-node CTDB cluster of smbds, which
#                the stage sets up and tears down
#   conformance  smbtorture, plain share vs iotune shares
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import os
import re
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
STAGES = ['unit', 'fuzz', 'integration', 'package', 'glusterfs', 'cluster',
          'conformance']

# fuzz target -> libFuzzer arguments (bounded: a test, not a campaign)
FUZZ_TARGETS = {
    'parsers': ['-runs=200000', '-max_len=512'],
    'wcache': ['-runs=200000', '-max_len=2048'],
}


def run(cmd):
    """Runs cmd with output passed through; returns (rc, output)."""
    print('$ ' + ' '.join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            errors='replace')
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return proc.wait(), ''.join(lines)


def count(pattern, text):
    return sum(int(m) for m in re.findall(pattern, text))


def stage_unit():
    passed = failed = 0
    pattern = os.path.join(REPO, 'build', 'tests', 'unit', 'test_*')
    tests = sorted(p for p in glob.glob(pattern)
                   if not p.endswith('.o') and os.access(p, os.X_OK))
    if not tests:
        print('no unit test binaries: run ./waf build first')
        return 0, 1
    for binary in tests:
        rc, out = run([binary])
        p = count(r'\[  PASSED  \] (\d+) test', out)
        f = count(r'\[  FAILED  \] (\d+) test', out)
        if rc != 0 and f == 0:
            f = 1
        passed += p
        failed += f
    return passed, failed


def stage_fuzz():
    """Longer bounded runs of the fuzzers ./waf build built (and ran
    briefly)"""
    passed = failed = 0
    out_dir = os.path.join(REPO, 'build', 'fuzz')
    os.makedirs(out_dir, exist_ok=True)
    for name, fuzz_args in sorted(FUZZ_TARGETS.items()):
        binary = os.path.join(REPO, 'build', 'tests', 'fuzz',
                              'fuzz_' + name)
        corpus = os.path.join(out_dir, 'corpus_' + name)
        os.makedirs(corpus, exist_ok=True)
        if not os.access(binary, os.X_OK):
            print('%s is missing: ./waf configure build needs clang with '
                  'libFuzzer (apt-get install clang libclang-rt-14-dev)' %
                  binary)
            failed += 1
            continue
        rc, _ = run([binary, '-seed=1', '-artifact_prefix=%s/' %
                     out_dir] + fuzz_args + [corpus])
        if rc == 0:
            passed += 1
        else:
            failed += 1
    return passed, failed


# tests skipped by the current stage (the reasons are printed by -rs)
SKIPPED = []


def pytest_stage(marks):
    rc, out = run(['/usr/bin/python3', '-m', 'pytest', '-q', '-rfEs',
                   '-p', 'no:cacheprovider', '-m', marks,
                   'tests/integration'])
    tail = out.strip().splitlines()[-1] if out.strip() else ''
    passed = count(r'(\d+) passed', tail)
    failed = count(r'(\d+) (?:failed|error)', tail)
    SKIPPED.append(count(r'(\d+) skipped', tail))
    if rc != 0 and failed == 0:
        failed = 1
    return passed, failed


def stage_integration():
    return pytest_stage('not glusterfs and not cluster and not package')


def stage_package():
    return pytest_stage('package')


def stage_glusterfs():
    return pytest_stage('glusterfs')


def stage_cluster():
    return pytest_stage('cluster')


def stage_conformance():
    rc, out = run(['/usr/bin/python3',
                   'tests/conformance/run_conformance.py'])
    m = re.findall(r'^conformance: (\d+) passed, (\d+) failed$', out, re.M)
    if not m:
        return 0, 1
    passed, failed = int(m[-1][0]), int(m[-1][1])
    if rc != 0 and failed == 0:
        failed = 1
    return passed, failed


def main():
    stages = sys.argv[1:] or STAGES
    for s in stages:
        if s not in STAGES:
            sys.exit('unknown stage %r (known: %s)' % (s, ', '.join(STAGES)))
    total_p = total_f = 0
    summary = []
    for s in stages:
        print('\n==== %s ====' % s, flush=True)
        started = time.monotonic()
        del SKIPPED[:]
        p, f = globals()['stage_' + s]()
        skipped = ('  %d SKIPPED (reasons above)' % sum(SKIPPED)
                   if sum(SKIPPED) else '')
        summary.append('%-12s %4d passed %3d failed  %6.0fs%s' %
                       (s, p, f, time.monotonic() - started, skipped))
        total_p += p
        total_f += f
    print('\n==== summary ====')
    print('\n'.join(summary))
    print('tests: %d passed, %d failed' % (total_p, total_f))
    return 1 if total_f or not total_p else 0


if __name__ == '__main__':
    sys.exit(main())
