# The foundation: real smbd loads iotune, data passes through unchanged,
# invalid options refuse the tree connect with a message for the admin.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import random
import re

import pytest

import harness
from conftest import IOTUNE, PLAIN, start_smbd

BAD_VALUES = [
    ('bad_size', 'write cache size', 'lots', 'a size in bytes'),
    ('bad_range', 'write cache size', '5G', 'out of range'),
    ('bad_files', 'write cache max files', '-1', 'a whole number'),
    ('bad_timeout', 'write cache flush timeout', '0', 'from 1 to'),
]


@pytest.fixture(scope='module')
def smbd(request):
    shares = {'plain': PLAIN, 'iotune': IOTUNE}
    for share, option, value, _ in BAD_VALUES:
        shares[share] = dict(IOTUNE)
        shares[share]['iotune:' + option] = value
    shares['twice'] = dict(IOTUNE)
    shares['twice']['vfs objects'] = 'iotune iotune'
    shares['batches_above'] = dict(IOTUNE)
    shares['batches_above'].update({
        'vfs objects': 'iotune iotune_fault',
        'iotune:write cache batch reservations': 'yes'})
    return start_smbd(request, shares)


def test_iotune_share_loads_module(smbd):
    client = harness.PyClient(smbd, 'iotune')
    log = smbd.log_text()
    assert "share 'iotune' connected: write cache size = 1M" in log
    assert smbd.child_maps(harness.module_path())
    del client


def test_plain_share_does_not_load_module(smbd):
    harness.smbclient(smbd, 'plain', 'ls')
    assert "share 'plain' connected" not in smbd.log_text()


@pytest.mark.parametrize('share', ['plain', 'iotune'])
def test_streaming_roundtrip_is_byte_identical(smbd, share, tmp_path):
    src = tmp_path / 'src.bin'
    back = tmp_path / 'back.bin'
    src.write_bytes(random.Random(7).randbytes(24 * 1024 * 1024 + 123))
    harness.smbclient(smbd, share,
                      'put %s big.bin; get big.bin %s' % (src, back))
    on_disk = os.path.join(smbd.share_path(share), 'big.bin')
    want = harness.sha256_file(src)
    assert harness.sha256_file(back) == want
    assert harness.sha256_file(on_disk) == want


@pytest.mark.parametrize('oplock', [0, harness.PyClient.REQUEST_BATCH_OPLOCK])
def test_small_writes_roundtrip(smbd, oplock):
    """Small, out-of-order, overlapping and extending writes, read back
    through the same handle, a new handle and the share's directory."""
    rnd = random.Random(oplock + 11)
    model = bytearray()
    client = harness.PyClient(smbd, 'iotune')
    fnum = client.open('small.bin', harness.PyClient.FILE_OVERWRITE_IF,
                       oplock=oplock)
    for _ in range(300):
        offset = rnd.randrange(0, 512 * 1024)
        data = rnd.randbytes(rnd.choice([1, 512, 4096, 4097, 65536]))
        assert client.write(fnum, data, offset) == len(data)
        if len(model) < offset:
            model.extend(bytes(offset - len(model)))
        model[offset:offset + len(data)] = data
        if rnd.random() < 0.2:
            at = rnd.randrange(0, len(model))
            got = client.read(fnum, at, 8192)
            assert got == bytes(model[at:at + 8192])
    assert client.read(fnum, 0, len(model)) == bytes(model)
    client.close(fnum)

    fnum = client.open('small.bin', harness.PyClient.FILE_OPEN)
    assert client.read(fnum, 0, len(model) + 100) == bytes(model)
    client.close(fnum)
    with open(os.path.join(smbd.share_path('iotune'), 'small.bin'),
              'rb') as f:
        assert f.read() == bytes(model)


@pytest.mark.parametrize('share,option,value,accepted', BAD_VALUES)
def test_invalid_option_refuses_tree_connect(smbd, share, option, value,
                                             accepted):
    r = harness.smbclient(smbd, share, 'ls', check=False)
    assert r.returncode != 0
    assert 'NT_STATUS_UNSUCCESSFUL' in r.stdout + r.stderr
    pattern = (r"share '%s': invalid value '%s' for 'iotune:%s'.*"
               r"%s.*refusing the tree connect" %
               (re.escape(share), re.escape(value), re.escape(option),
                re.escape(accepted)))
    assert re.search(pattern, smbd.log_text())
    # the rest of the server is unaffected
    harness.smbclient(smbd, 'iotune', 'ls')


def test_listed_twice_refuses_tree_connect(smbd):
    r = harness.smbclient(smbd, 'twice', 'ls', check=False)
    assert r.returncode != 0
    assert 'NT_STATUS_UNSUCCESSFUL' in r.stdout + r.stderr
    assert re.search(r"share 'twice': 'vfs objects' lists iotune twice; "
                     r"list it once; refusing the tree connect",
                     smbd.log_text())
    harness.smbclient(smbd, 'iotune', 'ls')


def test_batch_reservations_above_a_module_refuse_tree_connect(smbd):
    """batched reservations call fallocate(2) in smbd's thread pool:
    with a module below iotune they would bypass it"""
    r = harness.smbclient(smbd, 'batches_above', 'ls', check=False)
    assert r.returncode != 0
    assert 'NT_STATUS_UNSUCCESSFUL' in r.stdout + r.stderr
    assert re.search(r"share 'batches_above': 'iotune:write cache batch "
                     r"reservations = yes' needs iotune last in 'vfs "
                     r"objects'.*refusing the tree connect",
                     smbd.log_text())
    harness.smbclient(smbd, 'iotune', 'ls')
