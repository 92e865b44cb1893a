# iotune's options as modules/config.c defines them, for the tests that
# hold documentation and examples to that table: the option table parsed
# from the C source, and values read the way config.c reads them.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
CONFIG_C = os.path.join(REPO, 'modules', 'config.c')

KIB = 1024
MIB = KIB * KIB
GIB = KIB * MIB


def c_number(expr):
    """A min or max of the option table: '0', '4 * KIB', '3600 * 1000'"""
    names = {'KIB': KIB, 'MIB': MIB, 'GIB': GIB}
    value = 1
    for factor in expr.split('*'):
        factor = factor.strip()
        if factor in names:
            value *= names[factor]
        elif factor.isdigit():
            value *= int(factor)
        else:
            raise ValueError('cannot read %r in %r' % (factor, expr))
    return value


def enum_tables(source):
    """name of a 'struct iotune_enum_value' array -> its value names"""
    tables = {}
    for m in re.finditer(r'static const struct iotune_enum_value '
                         r'(\w+)\[\] = \{(.*?)\n\};', source, re.S):
        tables[m.group(1)] = re.findall(r'\{ "([^"]+)",', m.group(2))
    return tables


def config_options():
    """The option table of modules/config.c: name -> dict(kind, default,
    min, max, values)"""
    with open(CONFIG_C) as f:
        source = f.read()
    m = re.search(r'static const struct option_spec option_specs\[\] = '
                  r'\{(.*?)\n\};', source, re.S)
    assert m, 'no option_specs table in %s' % CONFIG_C
    tables = enum_tables(source)
    options = {}
    for entry in re.findall(r'\{(.*?)\n\t\}', m.group(1), re.S):
        fields = dict(re.findall(r'\.(\w+) = ([^,]+),', entry))
        name = fields['name'].strip('"')
        opt = {'kind': fields['kind'],
               'default': fields['default_text'].strip('"')}
        if 'min' in fields or 'max' in fields:
            opt['min'] = c_number(fields.get('min', '0'))
            opt['max'] = c_number(fields['max'])
        if 'values' in fields:
            opt['values'] = tables[fields['values']]
        assert name not in options, 'option %r twice' % name
        options[name] = opt
    # a check of this parser, not of the module
    assert len(options) == len(re.findall(r'\.name = "', m.group(1))) \
        and 'write cache size' in options, options
    return options


def parse_value(kind, text):
    """A value as config.c parses it (sizes K/M/G binary, times ms/s), as
    a number; the text itself for booleans and enums"""
    text = text.strip()
    units = {
        'OPTION_SIZE': {'': 1, 'b': 1, 'k': KIB, 'kb': KIB, 'kib': KIB,
                        'm': MIB, 'mb': MIB, 'mib': MIB,
                        'g': GIB, 'gb': GIB, 'gib': GIB},
        'OPTION_MSEC': {'': 1, 'ms': 1, 's': 1000},
        'OPTION_UINT': {'': 1},
    }
    if kind == 'OPTION_SIZE_AUTO':
        if text.lower() == 'auto':
            return 'auto'
        kind = 'OPTION_SIZE'
    if kind not in units:
        return text.lower()
    m = re.fullmatch(r'(\d+)\s*([A-Za-z]*)', text)
    assert m, 'not a number: %r' % text
    return int(m.group(1)) * units[kind][m.group(2).lower()]
