# The GlusterFS part of bench/write_matrix.py (--gluster): a real
# single-brick volume on this host, a share on it through Samba's
# vfs_glusterfs with and without iotune, and shares on a FUSE mount of it
# (GlusterFS's own client, whose write-behind is the anchor: it is
# measured on and off, since vfs_glusterfs switches it to pass-through).
# A control pair (a second share without iotune against the first) is
# measured after the matrix, in both runs.
# A reservation's cost alone (bench/gfapi_cost.py) goes with the
# round-trip floor: the bound of exact reservations with one write in
# flight.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import gfapi_cost  # noqa: E402
import gluster  # noqa: E402
import harness  # noqa: E402


def control_matrix(pumper, wm, args, blocks, depths):
    """the control pair: a second share through vfs_glusterfs without
    iotune against the first, both on new connections (so new smbd
    processes, as the local pairs have: the first's process has just
    run the matrix).  What two alike shares read, cell by cell: the
    noise floor the no-regression goal is judged against."""
    pumper.fresh(*wm.PAIRS['glusterfs-control'])
    return wm.matrix(pumper, 'glusterfs-control', args.rounds, args.scale,
                     blocks, depths)


def run(args, blocks, depths, wm):
    """wm: bench/write_matrix.py.  Returns the cells of the matrix, the
    round-trip floor of 4 KiB writes (wm.round_trip_floor) and the
    coalescing goal's rows (wm.coalescing_goal)."""
    workdir = harness.scratch_dir('bench-gluster-')
    volume = gluster.Gluster(os.path.join(workdir, 'volume'))
    out = {'cells': [], 'floor': [], 'coalescing': []}
    try:
        volume.start()
        mnt = volume.mount(os.path.join(workdir, 'mnt'))
        for d in ('plain', 'iotune'):
            os.makedirs(os.path.join(mnt, d), exist_ok=True)
        control = os.path.join(workdir, 'free-reservations.ctl')
        with open(control, 'w') as f:
            f.write(wm.FREE_RESERVATION)
        null_control = os.path.join(workdir, 'null-writes.ctl')
        with open(null_control, 'w') as f:
            f.write(wm.NULL_WRITE)
        shares = {
            'gl_plain': volume.share('glusterfs'),
            'gl_plain_b': volume.share('glusterfs'),
            'gl_iotune': volume.share('iotune glusterfs'),
            'gl_free_reservations': volume.share(
                'iotune iotune_fault glusterfs',
                **{'iotune_fault:control': control}),
            wm.NULL_WRITES: {'vfs objects': 'iotune_fault',
                             'iotune_fault:control': null_control},
            'fuse_plain': {'path': os.path.join(mnt, 'plain')},
            'fuse_iotune': {'vfs objects': 'iotune',
                            'path': os.path.join(mnt, 'iotune')},
        }
        with harness.Smbd(os.path.join(workdir, 'smbd'), shares,
                          log_level='0') as smbd:
            pumper = wm.Pumper(smbd, delete=False)
            out['cells'] += wm.matrix(pumper, 'glusterfs', args.rounds,
                                      args.scale, blocks, depths)
            out['cells'] += control_matrix(pumper, wm, args, blocks, depths)
            if args.matrix_only:
                pumper.quit()
                return out
            out['floor'].append(wm.round_trip_floor(
                pumper, 'glusterfs', args.rounds, args.scale))
            out['floor'][-1]['fallocate_us'] = round(
                gfapi_cost.fallocate_us(volume.host, gluster.VOLUME,
                                        rounds=args.rounds), 1)
            print('glusterfs: a reservation alone (glfs_fallocate of 4 KiB '
                  'past the end, without smbd): %.1f us' %
                  out['floor'][-1]['fallocate_us'], flush=True)
            out['coalescing'] = wm.coalescing_goal(
                pumper, 'glusterfs', ('gl_iotune', 'gl_plain',
                                      'gl_free_reservations'),
                args.rounds, args.scale)
            for wb in ('on', 'off'):
                volume.set('performance.write-behind', wb)
                out['cells'] += wm.matrix(pumper, 'fuse-wb-' + wb,
                                          args.rounds, args.scale, blocks,
                                          depths)
            pumper.quit()
    finally:
        volume.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return out
