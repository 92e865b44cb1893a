/*
 * iotune: what differs between the Samba releases iotune is built
 * against, in one place.  No Samba version constant is used anywhere
 * else: a file that needs a difference uses a name from here.  Include it
 * after Samba's includes.h.
 *
 * Tested: 4.17 (Debian 12) and 4.22 (Debian 13).  Newer trees build with
 * what 4.22 needs until something here says otherwise; an smbd of
 * another major.minor than the tree refuses the tree connect
 * (iotune_smbd_version_ok()).
 *
 * Copyright (C) iotune authors 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 *
 * This program is distributed in the hope that it will be useful,
 * but WITHOUT ANY WARRANTY; without even the implied warranty of
 * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
 * GNU General Public License for more details.
 *
 * You should have received a copy of the GNU General Public License
 * along with this program.  If not, see <http://www.gnu.org/licenses/>.
 */

#ifndef IOTUNE_COMPAT_H
#define IOTUNE_COMPAT_H

#include "version.h"

/* the Samba tree iotune is being built against */
#define IOTUNE_BUILT_MAJOR SAMBA_VERSION_MAJOR
#define IOTUNE_BUILT_MINOR SAMBA_VERSION_MINOR
#define IOTUNE_SAMBA_AT_LEAST(major, minor)				\
	(SAMBA_VERSION_MAJOR > (major) ||				\
	 (SAMBA_VERSION_MAJOR == (major) && SAMBA_VERSION_MINOR >= (minor)))

/* the releases the integration and conformance stages ran against */
#define IOTUNE_SAMBA_TESTED(major, minor)				\
	((major) == 4 && ((minor) == 17 || (minor) == 22))

/*
 * sys_proc_fd_path(): a caller's char buffer and its size up to 4.19;
 * a struct sys_proc_fd_path_buf since 4.20.
 */
#if IOTUNE_SAMBA_AT_LEAST(4, 20)
typedef struct sys_proc_fd_path_buf iotune_proc_fd_path_buf;
#define iotune_proc_fd_path(fd, b) sys_proc_fd_path((fd), (b))
#else
typedef struct {
	char buf[PATH_MAX];
} iotune_proc_fd_path_buf;
#define iotune_proc_fd_path(fd, b)					\
	sys_proc_fd_path((fd), (b)->buf, sizeof((b)->buf))
#endif

/*
 * The write time clients see: up to 4.22 smbd keeps a delayed write time
 * of its own for open files (set at close); since 4.23 it reports the
 * file system's modification time and sets a sticky write time again
 * after every write.  1: the write cache reports the time of cached
 * writes that have not landed through its stat overlay.
 */
#define IOTUNE_SMBD_FS_WRITE_TIME IOTUNE_SAMBA_AT_LEAST(4, 23)

/*
 * libsmb's client API, for the test client tests/clients/smb2_script.c:
 * smb2cli_create_recv() returns a symlink error context since 4.18;
 * GUID_to_ndr_buf() returns void and cli_full_connection_creds() takes a
 * talloc context first since 4.21.
 */
#if IOTUNE_SAMBA_AT_LEAST(4, 18)
#define iotune_smb2cli_create_recv(req, fp, fv, cr, mem, blobs)		\
	smb2cli_create_recv((req), (fp), (fv), (cr), (mem), (blobs), NULL)
#else
#define iotune_smb2cli_create_recv(req, fp, fv, cr, mem, blobs)		\
	smb2cli_create_recv((req), (fp), (fv), (cr), (mem), (blobs))
#endif
#if IOTUNE_SAMBA_AT_LEAST(4, 21)
#define iotune_guid_to_ndr_buf(guid, buf)				\
	(GUID_to_ndr_buf((guid), (buf)), NT_STATUS_OK)
#define iotune_cli_full_connection_creds(mem_ctx, ...)			\
	cli_full_connection_creds((mem_ctx), __VA_ARGS__)
#else
#define iotune_guid_to_ndr_buf(guid, buf) GUID_to_ndr_buf((guid), (buf))
#define iotune_cli_full_connection_creds(mem_ctx, ...)			\
	cli_full_connection_creds(__VA_ARGS__)
#endif

#endif /* IOTUNE_COMPAT_H */
