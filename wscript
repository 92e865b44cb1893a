#!/usr/bin/env python3
# iotune - build of the VFS module, its pure core, unit tests, fuzzers
# and tools.
#
# Run through ./waf, which takes waf from the prepared Samba tree
# (scripts/prepare-samba.sh) and passes that tree in IOTUNE_SAMBA_TREE.
# Without one (IOTUNE_CORE_ONLY, or no Samba installed), the core alone
# is built: it needs a C compiler and cmocka, and clang for the fuzzers.
# Every build runs the unit tests and short fuzzer runs (tests that did
# not change are not run again; --alltests runs all), and renders the man
# page docs/vfs_iotune.8.xml to build/vfs_iotune.8 when xsltproc and
# Debian's DocBook stylesheets are there.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import os
import re
import subprocess

from waflib import Logs
from waflib.Tools import waf_unit_test

APPNAME = 'iotune'
VERSION = '0.1.0'

top = '.'
out = 'build'

CORE_SOURCES = [
    'modules/wcache.c',
    'modules/wcache_flush.c',
    'modules/wcache_reserve.c',
    'modules/rsvq.c',
    'modules/wcache_times.c',
    'modules/wcache_buf.c',
    'modules/config.c',
    'modules/stats.c',
    'modules/readahead.c',
    'modules/memcg.c',
    'modules/dio.c',
    'modules/dio_probe.c',
    'modules/dio_io.c',
]

# the Samba side of the module, one file per concern (vfs_iotune.h)
MODULE_SOURCES = [
    'modules/vfs_iotune.c',
    'modules/vfs_iotune_io.c',
    'modules/vfs_iotune_pass.c',
    'modules/vfs_iotune_wcache.c',
    'modules/vfs_iotune_wcache_act.c',
    'modules/vfs_iotune_reserve.c',
    'modules/vfs_iotune_wctimes.c',
    'modules/vfs_iotune_offload.c',
    'modules/vfs_iotune_dio.c',
    'modules/vfs_iotune_ra.c',
    'modules/vfs_iotune_pressure.c',
    'modules/vfs_iotune_stats.c',
    'modules/vfs_iotune_smbd.c',
]

# fuzz target -> libFuzzer arguments of the short run of every build
FUZZ_TARGETS = {
    'parsers': '-max_len=512',
    'wcache': '-max_len=2048',
    'rsvq': '-max_len=1024',
}
FUZZ_SMOKE_RUNS = 20000

# the man page: DocBook 4.5 source, rendered by Debian's docbook-xsl
# (docbook-xml resolves its DTD through the XML catalog, so --nonet works)
MANPAGE_SOURCE = 'docs/vfs_iotune.8.xml'
MANPAGE_XSL = '/usr/share/xml/docbook/stylesheet/docbook-xsl/manpages/' \
    'docbook.xsl'
MANPAGE_DTD = '/usr/share/xml/docbook/schema/dtd/4.5/docbookx.dtd'

FUZZ_FLAGS = ['-g', '-O1', '-fsanitize=fuzzer,address,undefined',
              '-fno-sanitize-recover=undefined']

FUZZ_CHECK = """
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }
"""

# unit test name -> extra link flags (syscall and libc fakes)
UNIT_TESTS = {
    'wcache': ['-Wl,--wrap=malloc', '-Wl,--wrap=mmap'],
    'wctimes': [],
    'config': [],
    'stats': [],
    'readahead': [],
    'memcg': [],
    'dio': [],
    'dio_probe': ['-Wl,--wrap=statx'],
    'dio_io': [],
    'passtab': [],
    'rsvq': [],
}

WARNINGS = ['-Wall', '-Wextra', '-Wno-unused-parameter',
            '-Wno-missing-field-initializers', '-Werror=implicit',
            '-Werror=strict-prototypes', '-Werror=format']

SAMBA_DEFINES = ['_SAMBA_BUILD_=4', 'HAVE_CONFIG_H=1', '_GNU_SOURCE=1',
                 '_XOPEN_SOURCE_EXTENDED=1', '__STDC_WANT_LIB_EXT1__=1',
                 '_REENTRANT', 'vfs_iotune_init=samba_init_module']

# The Samba libraries the module (and the fault module) link against, by
# name without prefix and suffix.  Private ones are in smbd's MODULESDIR
# as lib<name>-samba4.so.0 (4.17) or lib<name>-private-samba.so.0 (4.22);
# public ones in the library directory above it as lib<name>.so.<major>
# (libndr.so.3 in 4.17, .so.6 in 4.22): configure finds the files.
SAMBA_LIBS = [('smbd-base', 'private'), ('samba-debug', 'private'),
              ('smbconf', 'public'), ('tevent-util', 'public'),
              ('samba-util', 'public'), ('genrand', 'private'),
              ('samba3-util', 'private'), ('messages-dgm', 'private'),
              ('dbwrap', 'private'), ('util-tdb', 'private'),
              ('smbd-shim', 'private')]

# ... and the SMB2 test client
CLIENT_LIBS = [('libsmb', 'private'), ('cli-smb-common', 'private'),
               ('samba-credentials', 'public'), ('smbconf', 'public'),
               ('samba-util', 'public'), ('samba-errors', 'public'),
               ('samba-debug', 'private'), ('genrand', 'private'),
               ('samba3-util', 'private'), ('tevent-util', 'public'),
               ('ndr', 'public')]


def options(opt):
    opt.load('compiler_c')
    opt.load('waf_unit_test')


def smbd_build_option(name):
    for line in subprocess.check_output(['smbd', '-b']).decode().splitlines():
        key, _, value = line.strip().partition(': ')
        if key == name:
            return value
    raise RuntimeError('smbd -b does not name ' + name)


def fuzz_env(env):
    e = env.derive()
    e.CC = e.LINK_CC = e.CLANG
    e.CFLAGS = FUZZ_FLAGS
    e.LINKFLAGS = FUZZ_FLAGS
    return e


def configure_fuzzers(conf):
    """clang with libFuzzer, or no fuzzers (said so)"""
    if not conf.find_program('clang', var='CLANG', mandatory=False):
        Logs.warn('no clang: the fuzzers are not built (apt-get install '
                  'clang libclang-rt-14-dev)')
        return
    try:
        conf.check(features='c cprogram', fragment=FUZZ_CHECK,
                   env=fuzz_env(conf.env),
                   msg="Checking for clang's libFuzzer")
        conf.env.FUZZ = True
    except conf.errors.ConfigurationError:
        Logs.warn('clang without libFuzzer: the fuzzers are not built')


def configure_manpage(conf):
    """xsltproc and the DocBook stylesheets and DTD, or no man page
    (said so)"""
    conf.env.MANDIR = os.path.join(conf.env.PREFIX, 'share', 'man')
    missing = []
    if not conf.find_program('xsltproc', var='XSLTPROC', mandatory=False):
        missing.append('xsltproc')
    for path, package in ((MANPAGE_XSL, 'docbook-xsl'),
                          (MANPAGE_DTD, 'docbook-xml')):
        if not os.path.isfile(path):
            conf.msg('Checking for ' + path, 'not found', color='YELLOW')
            missing.append(package)
    if missing:
        conf.env.XSLTPROC = []
        Logs.warn('the man page build/vfs_iotune.8 is not built: missing '
                  '%s (apt-get install %s)' % (', '.join(missing),
                                              ' '.join(missing)))


def samba_lib_file(conf, name, kind):
    """the file name of one of SAMBA_LIBS / CLIENT_LIBS on this system"""
    private = conf.env.MODULESDIR
    if kind == 'private':
        candidates = [os.path.join(private, 'lib%s-samba4.so.0' % name),
                      os.path.join(private,
                                   'lib%s-private-samba.so.0' % name)]
    else:
        candidates = sorted(glob.glob(os.path.join(
            os.path.dirname(private), 'lib%s.so.[0-9]*' % name)))
        candidates = [c for c in candidates
                      if re.search(r'\.so\.[0-9]+$', c)]
    for c in candidates:
        if os.path.isfile(c):
            return os.path.basename(c)
    conf.fatal('Samba library %s (%s) not found next to %s' %
               (name, kind, private))


def configure_samba(conf, tree):
    conf.env.SAMBA_TREE = tree
    conf.env.MODULESDIR = smbd_build_option('MODULESDIR')
    conf.msg('Samba tree', tree)
    conf.msg('smbd MODULESDIR', conf.env.MODULESDIR)
    conf.env.SAMBA_LIB_FILES = [samba_lib_file(conf, n, k)
                                for n, k in SAMBA_LIBS]
    conf.env.CLIENT_LIB_FILES = [samba_lib_file(conf, n, k)
                                 for n, k in CLIENT_LIBS]
    conf.msg('Samba libraries', ' '.join(conf.env.SAMBA_LIB_FILES))
    for lib in ('talloc', 'tdb', 'tevent'):
        conf.check_cfg(package=lib, args=['--cflags', '--libs'],
                       uselib_store=lib.upper())


# IOTUNE_SANITIZE=1 at configure time (scripts/sanitize.sh, in its own
# build directory): the module, the core, its unit tests, the fault module
# and the test client with AddressSanitizer and UBSan.  Reports do not
# stop the process (the sanitize stage collects them from log files);
# smbd loads the module with libasan and libubsan preloaded.
SANITIZE_FLAGS = ['-fsanitize=address,undefined', '-fno-omit-frame-pointer',
                  '-fsanitize-recover=address']


def configure(conf):
    conf.load('compiler_c')
    conf.load('waf_unit_test')
    conf.check_cfg(package='cmocka', args=['--cflags', '--libs'],
                   uselib_store='CMOCKA')
    sanitize = os.environ.get('IOTUNE_SANITIZE') == '1'
    if not sanitize:
        configure_fuzzers(conf)
    configure_manpage(conf)
    # hidden by default: calls between the module's own functions are
    # direct (no PLT, and the compiler may inline them); the modules
    # export only samba_init_module (_PUBLIC_)
    conf.env.append_value('CFLAGS', ['-O2', '-g', '-std=gnu11',
                                     '-fPIC', '-fvisibility=hidden'] +
                          WARNINGS)
    if sanitize:
        conf.env.append_value('CFLAGS', SANITIZE_FLAGS)
        conf.env.append_value('LINKFLAGS', SANITIZE_FLAGS)
        conf.msg('Sanitizers', ' '.join(SANITIZE_FLAGS))
    tree = os.environ.get('IOTUNE_SAMBA_TREE')
    if tree and os.path.isfile(os.path.join(tree, 'bin', 'default',
                                            'include', 'config.h')):
        configure_samba(conf, tree)
    else:
        conf.env.SAMBA_TREE = ''
        Logs.warn('no prepared Samba tree: building the core, its unit '
                  'tests and fuzzers only; the VFS module, the test '
                  'client and the fault module are skipped (./waf with '
                  'Samba installed prepares the tree)')


def samba_includes(bld):
    s = bld.env.SAMBA_TREE
    b = os.path.join(s, 'bin', 'default')
    return [os.path.join(b, 'include'), os.path.join(s, 'source3'),
            os.path.join(s, 'source3', 'include'),
            os.path.join(b, 'source3'), os.path.join(s, 'lib', 'replace'),
            s, b]


def build_core(bld):
    bld(features='c cstlib', source=CORE_SOURCES, target='iotune_core',
        includes='include', export_includes='include')
    for name, linkflags in sorted(UNIT_TESTS.items()):
        bld(features='c cprogram test', source='tests/unit/test_%s.c' % name,
            target='tests/unit/test_%s' % name, linkflags=linkflags,
            use='iotune_core CMOCKA', install_path=None)
    if bld.env.FUZZ:
        env = fuzz_env(bld.env)
        for name, args in sorted(FUZZ_TARGETS.items()):
            bld(features='c cprogram test', env=env,
                source=['tests/fuzz/fuzz_%s.c' % name] + CORE_SOURCES,
                target='tests/fuzz/fuzz_%s' % name, includes='include',
                install_path=None,
                ut_cmd='%%s -seed=1 -runs=%d %s' % (FUZZ_SMOKE_RUNS,
                                                   args))
    bld(features='c cprogram', source='bench/stats_micro.c',
        target='bench/stats-micro', use='iotune_core', install_path=None)


def build_manpage(bld):
    """docs/vfs_iotune.8.xml -> build/vfs_iotune.8, installed into
    ${MANDIR}/man8"""
    if not bld.env.XSLTPROC:
        Logs.warn('no xsltproc or DocBook stylesheets at configure time: '
                  'the man page build/vfs_iotune.8 is skipped')
        return
    # docbook-xsl names the file after the refentry (vfs_iotune.8) in the
    # directory of -o, which is where the target is
    bld(rule='${XSLTPROC} --nonet --xinclude '
        '--stringparam man.output.quietly 1 '
        '-o ${TGT} %s ${SRC}' % MANPAGE_XSL,
        source=MANPAGE_SOURCE, target='vfs_iotune.8')
    bld.install_files('${MANDIR}/man8',
                      [bld.path.find_or_declare('vfs_iotune.8')])


def build_samba_side(bld):
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
        lib=[':' + x for x in bld.env.SAMBA_LIB_FILES],
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
        lib=[':' + x for x in bld.env.SAMBA_LIB_FILES])

    # a scriptable SMB2 client for the integration tests (leases, breaks,
    # FLUSH, truncate: what python3-samba lacks)
    bld(features='c cprogram', source='tests/clients/smb2_script.c',
        target='tests/clients/smb2-script', install_path=None,
        use='TALLOC TEVENT',
        includes=['modules'] + samba_includes(bld),
        defines=SAMBA_DEFINES[:-1],
        cflags=['-Wno-sign-compare', '-Wno-unused-parameter'],
        linkflags=['-Wl,-z,defs', '-L' + libdir, '-Wl,-rpath,' + libdir],
        lib=[':' + x for x in bld.env.CLIENT_LIB_FILES])


def build(bld):
    build_core(bld)
    build_manpage(bld)
    if bld.env.SAMBA_TREE:
        build_samba_side(bld)
    else:
        Logs.warn('core only: no prepared Samba tree at configure time')
    bld.add_post_fun(waf_unit_test.summary)
    bld.add_post_fun(waf_unit_test.set_exit_code)
