#!/usr/bin/python3
# Runs iotune's test stages and prints one summary line at the end.
#   unit         cmocka tests of the core (build/tests/unit/test_*)
#   fuzz         libFuzzer targets of the core (tests/fuzz), bounded runs
#   integration  pytest against a real smbd (tests/integration)
#   sanitize     the module built with ASan and UBSan (scripts/sanitize.sh),
#                loaded into a real smbd in a private mount namespace; the
#                write cache, direct I/O and read-ahead integration tests;
#                any sanitizer report fails the stage
#   load         50 clients at once against the share with iotune and
#                without (tests/load/run_load.py); every acknowledged byte
#                and every hot read checked
#   package      builds the Debian package, installs it, loads the packaged
#                module in a real smbd, removes and purges it
#   glusterfs    pytest against a real smbd over a GlusterFS volume
#                (vfs_glusterfs), which the stage sets up and tears down
#   cluster      pytest against a two-node CTDB cluster of smbds, which
#                the stage sets up and tears down
#   conformance  smbtorture, plain share vs iotune shares
#   samba422     Samba 4.22 in a Debian 13 chroot (scripts/debian13-chroot.sh):
#                the module built there, its integration, package and
#                conformance stages run against the chroot's smbd, and a
#                module built for one release refuses the other's smbd
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
STAGES = ['unit', 'fuzz', 'integration', 'sanitize', 'load', 'package',
          'glusterfs', 'cluster', 'conformance', 'samba422']
# what the samba422 stage runs inside the chroot: the stages that meet
# smbd (the core's unit tests and fuzzers do not depend on Samba;
# GlusterFS and CTDB stay on the host's release), conformance with
# iotune's defaults against the plain share (all three variants took 30
# minutes on 4.22; the direct and tiny variants exercise iotune's own
# code, which is the same on both releases)
SAMBA422_STAGES = ['integration', 'package', 'conformance', 'versions']
CHROOT = os.path.join(REPO, 'scripts', 'debian13-chroot.sh')

# what the sanitize stage runs: the tests of the code that keeps data
# (test_sanitize.py first: its deliberate overflow must be reported)
SANITIZE_TESTS = ['test_sanitize.py', 'test_write_cache.py',
                  'test_write_cache_safety.py', 'test_reservation.py',
                  'test_direct_io.py', 'test_readahead.py']

# fuzz target -> libFuzzer arguments (bounded: a test, not a campaign)
FUZZ_TARGETS = {
    'parsers': ['-runs=200000', '-max_len=512'],
    'wcache': ['-runs=200000', '-max_len=2048'],
    'rsvq': ['-runs=200000', '-max_len=1024'],
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
        seeds = os.path.join(REPO, 'tests', 'fuzz', 'corpus', name)
        rc, _ = run([binary, '-seed=1', '-artifact_prefix=%s/' %
                     out_dir] + fuzz_args + [corpus] +
                    ([seeds] if os.path.isdir(seeds) else []))
        if rc == 0:
            passed += 1
        else:
            failed += 1
    return passed, failed


# tests skipped by the current stage (the reasons are printed by -rs)
SKIPPED = []


def pytest_counts(rc, out):
    """(passed, failed) from pytest's last line; skips go to SKIPPED"""
    tail = out.strip().splitlines()[-1] if out.strip() else ''
    passed = count(r'(\d+) passed', tail)
    failed = count(r'(\d+) (?:failed|error)', tail)
    SKIPPED.append(count(r'(\d+) skipped', tail))
    if rc != 0 and failed == 0:
        failed = 1
    return passed, failed


def pytest_stage(marks):
    return pytest_counts(*run(['/usr/bin/python3', '-m', 'pytest', '-q',
                               '-rfEs', '-p', 'no:cacheprovider', '-m',
                               marks, 'tests/integration']))


def stage_integration():
    return pytest_stage('not glusterfs and not cluster and not package '
                        'and not samba_versions and not sanitize')


def stage_sanitize():
    rc, _ = run(['sh', 'scripts/sanitize.sh', 'build'])
    if rc != 0:
        print('sanitize: the build with sanitizers failed')
        return 0, 1
    out_dir = os.path.join(REPO, 'build-sanitize')
    reports = os.path.join(out_dir, 'reports')
    for d in (reports, os.path.join(out_dir, 'canary-reports')):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(reports)
    passed, failed = pytest_counts(*run(
        ['sh', 'scripts/sanitize.sh', 'run', reports] +
        [os.path.join('tests', 'integration', t) for t in SANITIZE_TESTS]))
    found = sorted(glob.glob(os.path.join(reports, '*')))
    for path in found:
        print('==== sanitizer report %s ====' % path)
        with open(path, errors='replace') as f:
            print(f.read())
    print('sanitize: %d sanitizer reports' % len(found))
    return passed, failed + len(found)


def stage_load():
    rc, out = run(['/usr/bin/python3', 'tests/load/run_load.py'])
    if rc == 0 and re.search(r'^load: passed$', out, re.M):
        return 1, 0
    return 0, 1


def stage_package():
    return pytest_stage('package')


def stage_glusterfs():
    return pytest_stage('glusterfs')


def stage_cluster():
    return pytest_stage('cluster')


def stage_versions():
    """a module built for another release (IOTUNE_FOREIGN_MODULE)
    refuses this smbd: only inside the samba422 stage"""
    return pytest_stage('samba_versions')


def summary_counts(out):
    m = re.findall(r'^tests: (\d+) passed, (\d+) failed$', out, re.M)
    return (int(m[-1][0]), int(m[-1][1])) if m else (0, 1)


def stage_samba422():
    rc, out = run([CHROOT])
    if rc != 0:
        return 0, 1
    root = out.strip().splitlines()[-1]
    copy = os.path.join(root, 'iotune')
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(REPO, copy, symlinks=True,
                    ignore=shutil.ignore_patterns('build', 'build-sanitize',
                                                  '.git', '.lock-waf*'))
    host_module = os.path.join(REPO, 'build', 'iotune.so')
    shutil.copyfile(host_module, os.path.join(root, 'iotune-host.so'))
    rc, out = run([CHROOT, 'run', 'sh', '-c',
                   'cd /iotune && ./waf configure build'])
    if rc != 0:
        return 0, 1
    rc, out = run([CHROOT, 'run', 'env',
                   'IOTUNE_FOREIGN_MODULE=/iotune-host.so',
                   'IOTUNE_CONFORMANCE_VARIANTS=default', 'sh', '-c',
                   'cd /iotune && python3 tests/run_all.py ' +
                   ' '.join(SAMBA422_STAGES)])
    passed, failed = summary_counts(out)
    # and the 4.22 module in the host's smbd
    os.environ['IOTUNE_FOREIGN_MODULE'] = os.path.join(copy, 'build',
                                                       'iotune.so')
    try:
        p, f = pytest_stage('samba_versions')
    finally:
        del os.environ['IOTUNE_FOREIGN_MODULE']
    return passed + p, failed + f


def stage_conformance():
    """all variants; IOTUNE_CONFORMANCE_VARIANTS (comma separated) picks
    some"""
    variants = [v for v in os.environ.get('IOTUNE_CONFORMANCE_VARIANTS',
                                          '').split(',') if v]
    rc, out = run(['/usr/bin/python3',
                   'tests/conformance/run_conformance.py'] +
                  [a for v in variants for a in ('--variant', v)])
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
        if s not in STAGES + ['versions']:
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
