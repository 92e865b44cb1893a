#!/usr/bin/env python3
# iotune - build of the VFS module, its pure core, unit tests and tools.
#
# Run through ./waf, which takes waf from the prepared Samba tree
# (scripts/prepare-samba.sh) and passes that tree in IOTUNE_SAMBA_TREE.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import subprocess

APPNAME = 'iotune'
VERSION = '0.1.0'

top = '.'
out = 'build'

CORE_SOURCES = [
    'modules/wcache.c',
    'modules/wcache_flush.c',
    'modules/wcache_buf.c',
    'modules/config.c',
    'modules/stats.c',
    'modules/readahead.c',
    'modules/dio.c',
    'modules/dio_probe.c',
    'modules/dio_io.c',
]

# the Samba side of the module, one file per concern (vfs_iotune.h)
MODULE_SOURCES = [
    'modules/vfs_iotune.c',
    'modules/vfs_iotune_io.c',
    'modules/vfs_iotune_wcache.c',
    'modules/vfs_iotune_offload.c',
    'modules/vfs_iotune_dio.c',
    'modules/vfs_iotune_ra.c',
    'modules/vfs_iotune_stats.c',
    'modules/vfs_iotune_smbd.c',
]

# unit test name -> extra link flags (syscall and libc fakes)
UNIT_TESTS = {
    'wcache': ['-Wl,--wrap=malloc'],
    'config': [],
    'stats': [],
    'readahead': [],
    'dio': [],
    'dio_probe': ['-Wl,--wrap=statx'],
    'dio_io': [],
}

WARNINGS = ['-Wall', '-Wextra', '-Wno-unused-parameter',
            '-Wno-missing-field-initializers', '-Werror=implicit',
            '-Werror=strict-prototypes', '-Werror=format']

SAMBA_DEFINES = ['_SAMBA_BUILD_=4', 'HAVE_CONFIG_H=1', '_GNU_SOURCE=1',
                 '_XOPEN_SOURCE_EXTENDED=1', '__STDC_WANT_LIB_EXT1__=1',
                 '_REENTRANT', 'vfs_iotune_init=samba_init_module']

SAMBA_PRIVATE_LIBS = ['libsmbd-base-samba4.so.0',
                      'libsamba-debug-samba4.so.0',
                      'libsmbconf.so.0',
                      'libtevent-util.so.0',
                      'libsamba-util.so.0',
                      'libgenrand-samba4.so.0',
                      'libsamba3-util-samba4.so.0',
                      'libmessages-dgm-samba4.so.0']


CLIENT_LIBS = ['liblibsmb-samba4.so.0', 'libcli-smb-common-samba4.so.0',
               'libsamba-credentials.so.1', 'libsmbconf.so.0',
               'libsamba-util.so.0', 'libsamba-errors.so.1',
               'libsamba-debug-samba4.so.0', 'libgenrand-samba4.so.0',
               'libsamba3-util-samba4.so.0', 'libtevent-util.so.0']


def options(opt):
    opt.load('compiler_c')


def smbd_build_option(name):
    for line in subprocess.check_output(['smbd', '-b']).decode().splitlines():
        key, _, value = line.strip().partition(': ')
        if key == name:
            return value
    raise RuntimeError('smbd -b does not name ' + name)


def configure(conf):
    conf.load('compiler_c')
    tree = os.environ.get('IOTUNE_SAMBA_TREE')
    if not tree or not os.path.isfile(
            os.path.join(tree, 'bin/default/include/config.h')):
        conf.fatal('no prepared Samba tree: run ./waf (it calls '
                   'scripts/prepare-samba.sh) or set IOTUNE_SAMBA_TREE')
    conf.env.SAMBA_TREE = tree
    conf.env.MODULESDIR = smbd_build_option('MODULESDIR')
    conf.msg('Samba tree', tree)
    conf.msg('smbd MODULESDIR', conf.env.MODULESDIR)
    conf.check_cfg(package='cmocka', args=['--cflags', '--libs'],
                   uselib_store='CMOCKA')
    conf.check_cfg(package='talloc', args=['--cflags', '--libs'],
                   uselib_store='TALLOC')
    conf.check_cfg(package='tdb', args=['--cflags', '--libs'],
                   uselib_store='TDB')
    conf.check_cfg(package='tevent', args=['--cflags', '--libs'],
                   uselib_store='TEVENT')
    conf.env.append_value('CFLAGS', ['-O2', '-g', '-std=gnu11',
                                     '-fPIC'] + WARNINGS)


def samba_includes(bld):
    s = bld.env.SAMBA_TREE
    b = os.path.join(s, 'bin', 'default')
    return [os.path.join(b, 'include'), os.path.join(s, 'source3'),
            os.path.join(s, 'source3', 'include'),
            os.path.join(b, 'source3'), os.path.join(s, 'lib', 'replace'),
            s, b]


def build(bld):
    bld(features='c cstlib', source=CORE_SOURCES, target='iotune_core',
        includes='include', export_includes='include')

    libdir = bld.env.MODULESDIR
    module_env = bld.env.derive()
    module_env.cshlib_PATTERN = '%s.so'
    bld(features='c cshlib', source=MODULE_SOURCES,
        target='iotune', env=module_env,
        use='iotune_core TALLOC TEVENT TDB',
        includes=['include'] + samba_includes(bld),
        defines=SAMBA_DEFINES,
        cflags=['-Wno-sign-compare', '-Wno-unused-parameter'],
        linkflags=['-Wl,-z,defs', '-L' + libdir, '-Wl,-rpath,' + libdir],
        lib=[':' + x for x in SAMBA_PRIVATE_LIBS],
        install_path=os.path.join(libdir, 'vfs'))

    bld.install_files('${PREFIX}/bin', ['tools/iotune-stat'], chmod=0o755)

    # a test-only module below iotune that fails writes on demand; the
    # integration tests install it next to iotune.so, ./waf install never
    fault_env = bld.env.derive()
    fault_env.cshlib_PATTERN = '%s.so'
    bld(features='c cshlib', source='tests/vfs/vfs_iotune_fault.c',
        target='tests/vfs/iotune_fault', env=fault_env, install_path=None,
        use='TALLOC TEVENT',
        includes=samba_includes(bld),
        defines=SAMBA_DEFINES[:-1] +
        ['vfs_iotune_fault_init=samba_init_module'],
        cflags=['-Wno-sign-compare', '-Wno-unused-parameter'],
        linkflags=['-Wl,-z,defs', '-L' + libdir, '-Wl,-rpath,' + libdir],
        lib=[':' + x for x in SAMBA_PRIVATE_LIBS])

    # a scriptable SMB2 client for the integration tests (leases, breaks,
    # FLUSH, truncate: what python3-samba lacks)
    bld(features='c cprogram', source='tests/clients/smb2_script.c',
        target='tests/clients/smb2-script', install_path=None,
        use='TALLOC TEVENT',
        includes=samba_includes(bld),
        defines=SAMBA_DEFINES[:-1],
        cflags=['-Wno-sign-compare', '-Wno-unused-parameter'],
        linkflags=['-Wl,-z,defs', '-L' + libdir, '-Wl,-rpath,' + libdir],
        lib=[':' + x for x in CLIENT_LIBS])

    bld(features='c cprogram', source='bench/stats_micro.c',
        target='bench/stats-micro', use='iotune_core', install_path=None)

    for name, linkflags in sorted(UNIT_TESTS.items()):
        bld(features='c cprogram', source='tests/unit/test_%s.c' % name,
            target='tests/unit/test_%s' % name, linkflags=linkflags,
            use='iotune_core CMOCKA', install_path=None)
