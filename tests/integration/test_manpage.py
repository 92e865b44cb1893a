# The man page against the module: every option of modules/config.c's
# option table is documented in docs/vfs_iotune.8.xml as an OPTIONS term
# "iotune:NAME = VALUE", with the default, the accepted values and the
# range of the table, no other option is, and the page renders (xsltproc
# with Debian's docbook-xsl, as ./waf build does) to a man page that
# shows every term.  The README's option table is held to the same
# defaults.
#
# No smbd: this file starts nothing and installs nothing.  It runs in the
# integration stage (tests/run_all.py: it carries no stage marker) and
# alone:
#   /usr/bin/python3 -m pytest -q -p no:cacheprovider \
#       tests/integration/test_manpage.py
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from iotune_options import config_options, parse_value

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
MANPAGE_XML = os.path.join(REPO, 'docs', 'vfs_iotune.8.xml')
README = os.path.join(REPO, 'README.md')
# the stylesheet wscript renders the page with
MANPAGE_XSL = ('/usr/share/xml/docbook/stylesheet/docbook-xsl/manpages/'
               'docbook.xsl')


# what an OPTIONS term says after '=' for each kind of option (enums list
# their values, 'a | b | c')
TERM_VALUE = {
    'OPTION_SIZE': 'SIZE',
    'OPTION_SIZE_AUTO': 'auto | SIZE',
    'OPTION_MSEC': 'TIME',
    'OPTION_UINT': 'NUMBER',
    'OPTION_BOOL': 'BOOLEAN',
}


@pytest.fixture(scope='session')
def installed_module():
    """Overrides conftest.py's fixture of the same name, which installs
    build/iotune.so into smbd's module directory for the tests that
    start smbd: these tests need no module."""
    return None


# --- modules/config.c --------------------------------------------------


@pytest.fixture(scope='module')
def options():
    return config_options()


# --- docs/vfs_iotune.8.xml ---------------------------------------------


def manpage_terms():
    """The OPTIONS section's terms: (term text, listitem as XML text)"""
    root = ET.parse(MANPAGE_XML).getroot()
    sections = [s for s in root.iter('refsect1')
                if s.findtext('title', '').strip() == 'OPTIONS']
    assert len(sections) == 1, 'one OPTIONS refsect1 expected'
    terms = []
    for entry in sections[0].iter('varlistentry'):
        item = entry.find('listitem')
        for term in entry.findall('term'):
            text = ' '.join(''.join(term.itertext()).split())
            terms.append((text, ET.tostring(item, encoding='unicode')))
    return terms


def term_name(term):
    m = re.match(r'iotune:(.+?) = ', term)
    return m.group(1) if m else None


def flat(xml_text):
    """Whitespace collapsed, so a sentence may wrap in the source"""
    return ' '.join(xml_text.split())


def test_every_option_is_documented_and_no_other(options):
    terms = manpage_terms()
    documented = [term_name(t) for t, _ in terms]
    not_options = [t for t, _ in terms if term_name(t) is None]
    assert not not_options, (
        'OPTIONS terms that are not "iotune:NAME = VALUE": %s' % not_options)
    missing = sorted(set(options) - set(documented))
    assert not missing, (
        'options of modules/config.c missing from %s (add a '
        '<term>iotune:NAME = VALUE</term>): %s' % (MANPAGE_XML, missing))
    unknown = sorted(set(documented) - set(options))
    assert not unknown, (
        'options in %s that modules/config.c does not have: %s' %
        (MANPAGE_XML, unknown))
    twice = sorted(n for n in set(documented) if documented.count(n) > 1)
    assert not twice, 'options documented twice: %s' % twice


def test_terms_defaults_and_ranges_match_config(options):
    problems = []
    for term, item in manpage_terms():
        name = term_name(term)
        opt = options.get(name)
        if opt is None:
            continue    # reported by the test above
        kind = opt['kind']
        value = term.split(' = ', 1)[1]
        expected = (' | '.join(opt['values']) if kind == 'OPTION_ENUM'
                    else TERM_VALUE[kind])
        if value != expected:
            problems.append('%s: term says %r, config.c accepts %r' %
                            (name, value, expected))
        text = flat(item)
        m = re.search(r'The default is <literal>([^<]+)</literal>', text)
        if not m:
            problems.append('%s: no "The default is <literal>...'
                            '</literal>"' % name)
        elif parse_value(kind, m.group(1)) != parse_value(kind,
                                                           opt['default']):
            problems.append('%s: documented default %r, config.c %r' %
                            (name, m.group(1), opt['default']))
        if 'min' not in opt:
            continue
        m = re.search(r'Accepted: (<literal>auto</literal>, or )?'
                      r'<literal>([^<]+)</literal> to '
                      r'<literal>([^<]+)</literal>', text)
        if not m:
            problems.append('%s: no "Accepted: <literal>MIN</literal> to '
                            '<literal>MAX</literal>"' % name)
            continue
        if bool(m.group(1)) != (kind == 'OPTION_SIZE_AUTO'):
            problems.append('%s: "auto" documented %s, config.c kind %s' %
                            (name, bool(m.group(1)), kind))
        lo, hi = (parse_value(kind, m.group(2)),
                  parse_value(kind, m.group(3)))
        if (lo, hi) != (opt['min'], opt['max']):
            problems.append('%s: documented range %s to %s, config.c %d '
                            'to %d' % (name, m.group(2), m.group(3),
                                       opt['min'], opt['max']))
    assert not problems, '\n'.join(problems)


def test_readme_option_table_matches_config(options):
    """README.md's Options table names the same options and defaults"""
    with open(README) as f:
        rows = re.findall(r'^\| `iotune:([^`]+)` \| `([^`]+)` \|', f.read(),
                          re.M)
    readme = dict(rows)
    assert sorted(readme) == sorted(options), (
        'README.md options %s, config.c %s' % (sorted(readme),
                                                sorted(options)))
    wrong = ['%s: README %r, config.c %r' % (n, readme[n], o['default'])
             for n, o in sorted(options.items())
             if parse_value(o['kind'], readme[n]) !=
             parse_value(o['kind'], o['default'])]
    assert not wrong, '\n'.join(wrong)


# --- the rendered page -------------------------------------------------


def render(outdir):
    """Renders the page as wscript's rule does; returns its path"""
    if not shutil.which('xsltproc') or not os.path.isfile(MANPAGE_XSL):
        pytest.skip('xsltproc or docbook-xsl missing (scripts/'
                    'install-deps.sh installs them)')
    target = os.path.join(str(outdir), 'vfs_iotune.8')
    proc = subprocess.run(
        ['xsltproc', '--nonet', '--xinclude',
         '--stringparam', 'man.output.quietly', '1',
         '-o', target, MANPAGE_XSL, MANPAGE_XML],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=120)
    # --nonet: a DTD that is not in the XML catalog (docbook-xml) is an
    # error message here, not a download
    assert proc.returncode == 0 and not proc.stderr.strip(), (
        'xsltproc failed (rc %d):\n%s' % (proc.returncode, proc.stderr))
    assert os.path.isfile(target), os.listdir(str(outdir))
    return target


def man_text(page):
    if not shutil.which('man'):
        pytest.skip('man is missing (man-db; scripts/install-deps.sh '
                    'installs it)')
    env = dict(os.environ, MANWIDTH='200', LC_ALL='C.UTF-8',
               MANPAGER='cat', PAGER='cat')
    env.pop('MAN_KEEP_FORMATTING', None)
    proc = subprocess.run(['man', '-P', 'cat', '-l', page],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    # no bold/underline overstrikes, whatever man decides about them
    return re.sub(r'.\x08', '', proc.stdout)


def test_rendered_page_shows_every_option(options, tmp_path):
    text = man_text(render(tmp_path))
    lines = {' '.join(line.split()) for line in text.splitlines()}
    for heading in ('NAME', 'SYNOPSIS', 'DESCRIPTION', 'OPTIONS',
                    'EXAMPLES', 'VERSION', 'AUTHOR'):
        assert heading in lines, 'no %s section in man output' % heading
    assert 'vfs objects = iotune' in lines
    flat_text = ' '.join(text.split())
    missing = [term for term, _ in manpage_terms() if term not in flat_text]
    assert not missing, 'terms not in `man -l` output: %s' % missing
    missing = sorted(n for n in options if 'iotune:%s =' % n
                     not in flat_text)
    assert not missing, 'options not in `man -l` output: %s' % missing
