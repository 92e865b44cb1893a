# The Debian package: dpkg-buildpackage builds samba-vfs-iotune from a copy
# of this tree, the package pins the exact samba it was built against,
# installs iotune.so where smbd 4.17 loads it, a real smbd loads the
# packaged module, and the package removes and purges cleanly.  Runs in
# the "package" stage of tests/run_all.py (it replaces the module the
# other tests install, and puts the test build back at the end).
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import json
import os
import random
import shutil
import subprocess
import time

import pytest

import harness
from conftest import IOTUNE, start_smbd

pytestmark = pytest.mark.package

PACKAGE = 'samba-vfs-iotune'


def dpkg_version(package):
    r = subprocess.run(['dpkg-query', '-W', '-f=${Status} ${Version}',
                        package], capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.startswith('install ok installed'):
        return None
    return r.stdout.split()[-1]


def deb_field(deb, field):
    return subprocess.check_output(['dpkg-deb', '-f', deb, field],
                                   text=True).strip()


def deb_files(deb):
    out = subprocess.check_output(['dpkg-deb', '-c', deb], text=True)
    return [line.split()[-1].lstrip('.') for line in out.splitlines()]


def source_files():
    """the checkout's files as git sees them (tracked and new); without
    git (the copy the samba422 stage makes in its chroot), every file but
    build output"""
    if shutil.which('git') and os.path.isdir(os.path.join(harness.REPO,
                                                          '.git')):
        out = subprocess.check_output(
            ['git', 'ls-files', '-co', '--exclude-standard', '-z'],
            cwd=harness.REPO)
        return out.decode().split('\0')
    names = []
    for top, dirs, files in os.walk(harness.REPO):
        dirs[:] = [d for d in dirs if d not in ('build', 'build-sanitize',
                                                '.git', '__pycache__')]
        rel = os.path.relpath(top, harness.REPO)
        names += [os.path.normpath(os.path.join(rel, f)) for f in files
                  if not f.startswith('.lock-waf')]
    return names


@pytest.fixture(scope='module')
def deb(tmp_path_factory):
    """Builds the .deb from a copy of the tree (tracked and new files, as
    git sees them), so the build's output lands outside the checkout."""
    if dpkg_version(PACKAGE):
        pytest.skip('%s is installed on this machine; the test would '
                    'remove it' % PACKAGE)
    top = tmp_path_factory.mktemp('deb')
    src = top / 'iotune'
    for name in source_files():
        if not name or not os.path.exists(os.path.join(harness.REPO, name)):
            continue
        dest = src / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(harness.REPO, name), dest)
    r = subprocess.run(['dpkg-buildpackage', '-us', '-uc', '-b'], cwd=src,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = glob.glob(str(top / ('%s_*_amd64.deb' % PACKAGE)))
    assert len(debs) == 1, os.listdir(top)
    return debs[0]


def test_package_pins_the_samba_it_was_built_against(deb):
    depends = [d.strip() for d in deb_field(deb, 'Depends').split(',')]
    for package in ['samba', 'samba-libs']:
        assert '%s (= %s)' % (package, dpkg_version(package)) in depends
    for tool in ['python3-samba', 'python3-tdb']:
        assert tool in depends


def test_package_holds_module_tool_man_page_and_examples(deb):
    files = deb_files(deb)
    module = harness.module_path()
    assert module in files
    assert '/usr/bin/iotune-stat' in files
    assert '/usr/share/man/man8/vfs_iotune.8.gz' in files
    examples = [f for f in files
                if f.startswith('/usr/share/doc/%s/examples/' % PACKAGE)
                and f.endswith('.conf')]
    shipped = sorted(os.path.basename(f) for f in examples)
    in_tree = sorted(os.path.basename(f) for f in
                     glob.glob(os.path.join(harness.REPO, 'examples',
                                            '*.conf')))
    assert shipped == in_tree


def packaged_stat_written(smbd):
    """write bytes of the share 'iotune' as the packaged iotune-stat
    reads them, once smbd has published them (it does so periodically)"""
    deadline = time.monotonic() + 30
    while True:
        r = subprocess.run(['/usr/bin/iotune-stat', '-s', smbd.conf,
                            '--json'], capture_output=True, text=True)
        if r.returncode == 0:
            shares = json.loads(r.stdout)['shares']
            c = shares.get('iotune', {}).get('counters', {})
            if c.get('write_bytes', 0) > 0 or time.monotonic() > deadline:
                return c.get('write_bytes', 0)
        elif 'no counters yet' not in r.stderr or \
                time.monotonic() > deadline:
            raise AssertionError('iotune-stat: ' + r.stderr)
        time.sleep(0.5)


def installed_files():
    out = subprocess.check_output(['dpkg', '-L', PACKAGE], text=True)
    return [f for f in out.splitlines() if os.path.isfile(f)]


def test_install_load_in_smbd_and_remove(request, deb, tmp_path):
    module = harness.module_path()
    unpacked = tmp_path / 'unpacked'
    subprocess.check_call(['dpkg-deb', '-x', deb, str(unpacked)])
    packaged = harness.sha256_file(str(unpacked) + module)
    try:
        subprocess.check_call(['dpkg', '-i', deb])
        assert dpkg_version(PACKAGE) == deb_field(deb, 'Version')
        assert harness.sha256_file(module) == packaged

        smbd = start_smbd(request, {'iotune': IOTUNE})
        data = random.Random(3).randbytes(3 * 1024 * 1024 + 77)
        client = harness.PyClient(smbd, 'iotune')
        fnum = client.open('pkg.bin')
        client.write(fnum, data, 0)
        assert client.read(fnum, 0, len(data)) == data
        client.close(fnum)
        on_disk = os.path.join(smbd.share_path('iotune'), 'pkg.bin')
        assert harness.sha256_file(on_disk) == harness.sha256_bytes(data)
        assert "share 'iotune' connected" in smbd.log_text()
        assert smbd.child_maps(module)

        written = packaged_stat_written(smbd)
        assert written >= len(data)
        page = subprocess.run(['man', '-P', 'cat', 'vfs_iotune'],
                              capture_output=True, text=True,
                              env=dict(os.environ, MANWIDTH='120'))
        assert page.returncode == 0, page.stderr
        assert 'iotune:write cache size' in page.stdout
        del client
        smbd.stop()

        files = installed_files()
        subprocess.check_call(['dpkg', '-r', PACKAGE])
        assert dpkg_version(PACKAGE) is None
        left = [f for f in files if os.path.exists(f)]
        assert left == []
        subprocess.check_call(['dpkg', '--purge', PACKAGE])
        r = subprocess.run(['dpkg-query', '-W', PACKAGE],
                           capture_output=True)
        assert r.returncode != 0
    finally:
        if dpkg_version(PACKAGE):
            subprocess.call(['dpkg', '--purge', PACKAGE])
        harness.install_module()
