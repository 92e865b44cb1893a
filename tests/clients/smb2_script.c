/*
 * smb2-script: a scriptable SMB2 test client for iotune's tests.
 *
 * python3-samba has no leases, no break acknowledgement, no SMB2 FLUSH
 * and no SMB2 truncate; this client has them.  It reads one command per
 * line on stdin and answers each with one line: "ok ..." or "err ...".
 *
 *   open NAME none|exclusive|batch|lease [unbuffered] [durable]
 *                          -> ok oplock=L lease=S durable=D fid=P:V guid=G
 *   reconnect NAME P:V G none|lease
 *                          -> ok ...  (durable v2 reconnect, DH2C, of
 *                             the handle another client opened)
 *   write OFF HEX          -> ok N
 *   read OFF LEN           -> ok HEX
 *   flush | truncate SIZE | close | echo
 *   break MS               -> ok none | ok oplock L | ok lease S->N
 *                             (waits up to MS for a break not yet
 *                             reported, also with autoack)
 *   ack                    -> acknowledges the last break
 *   use N                  -> later commands act on handle slot N (0-15)
 *   pump write|read|echo TOTAL BLOCK DEPTH
 *                          -> ok BYTES USEC  (DEPTH requests in flight;
 *                             echo: one SMB2 ECHO per BLOCK bytes, the
 *                             round trip no request can beat)
 *   autoack                -> acknowledge every later break at once
 *   settime NTTIME         -> SET_INFO FileBasicInformation: LastWriteTime
 *   getinfo                -> ok size=N mtime=NTTIME (the open handle)
 *   stat NAME              -> ok size=N (a stat open: CREATE with
 *                             FILE_READ_ATTRIBUTES only, then CLOSE)
 *   list PATTERN           -> ok NAME=SIZE ... (the share's root)
 *   leasekey HEX32         -> later lease opens use this lease key
 *   quit
 *
 * A dummy SMB2 BREAK request is kept pending all the time: smbXcli drops
 * the connection on an unsolicited break it has no request for.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include "includes.h"
#include "libsmb/libsmb.h"
#include "libcli/smb/smbXcli_base.h"
#include "libcli/smb/smb2_lease.h"
#include "lib/util/tevent_ntstatus.h"
#include "trans2.h"
#include "auth/credentials/credentials.h"
#include "iotune_compat.h"

struct client {
	struct tevent_context *ev;
	struct cli_state *cli;
	uint32_t timeout;
	struct {
		uint64_t persistent;
		uint64_t volatile_;
	} slot[16];
	unsigned cur;
	uint64_t fid_persistent;
	uint64_t fid_volatile;
	struct smb2_lease_key lease_key;
	struct GUID create_guid;
	struct tevent_req *break_req;
	bool got_break;		/* a break not yet acknowledged */
	unsigned breaks_seen;
	unsigned breaks_reported;
	bool break_is_lease;
	uint8_t break_oplock;
	uint32_t break_cur;
	uint32_t break_new;
	uint32_t break_flags;
	uint64_t break_fid_persistent;
	uint64_t break_fid_volatile;
	bool autoack;
	struct smbXcli_tcon *trees[4];	/* tree 0: the share connected */
	unsigned n_trees;
};

static struct tevent_req *client_ack_send(struct client *c,
					  TALLOC_CTX *mem_ctx);

static void client_break_done(struct tevent_req *req);

static bool client_arm_break(struct client *c)
{
	c->break_req = smb2cli_req_create(c, c->ev, c->cli->conn,
					  SMB2_OP_BREAK, 0, 0, 0, NULL, NULL,
					  NULL, 0, NULL, 0, 0);
	if (c->break_req == NULL) {
		return false;
	}
	if (!smbXcli_req_set_pending(c->break_req)) {
		return false;
	}
	tevent_req_set_callback(c->break_req, client_break_done, c);
	return true;
}

static void client_break_done(struct tevent_req *req)
{
	struct client *c = tevent_req_callback_data(req, struct client);
	static const struct smb2cli_req_expected_response expected[] = {
		{ .status = NT_STATUS_OK, .body_size = 0x18 },
		{ .status = NT_STATUS_OK, .body_size = 0x2C },
	};
	struct iovec *iov = NULL;
	const uint8_t *body = NULL;
	NTSTATUS status;

	status = smb2cli_req_recv(req, c, &iov, expected,
				  ARRAY_SIZE(expected));
	c->break_req = NULL;
	if (NT_STATUS_IS_OK(status)) {
		body = (const uint8_t *)iov[1].iov_base;
		c->got_break = true;
		c->breaks_seen++;
		if (SVAL(body, 0) == 0x2C) {
			c->break_is_lease = true;
			c->break_flags = IVAL(body, 4);
			c->break_cur = IVAL(body, 24);
			c->break_new = IVAL(body, 28);
		} else {
			c->break_is_lease = false;
			c->break_oplock = CVAL(body, 2);
			c->break_fid_persistent = BVAL(body, 8);
			c->break_fid_volatile = BVAL(body, 16);
		}
	}
	TALLOC_FREE(req);
	TALLOC_FREE(iov);
	if (!client_arm_break(c)) {
		fprintf(stderr, "cannot re-arm the break request\n");
		exit(2);
	}
	if (c->got_break && c->autoack) {
		/* answered later, freed with the client */
		(void)client_ack_send(c, c);
	}
}

static NTSTATUS client_wait(struct client *c, struct tevent_req *req)
{
	NTSTATUS status;

	if (req == NULL) {
		return NT_STATUS_NO_MEMORY;
	}
	if (!tevent_req_poll_ntstatus(req, c->ev, &status)) {
		return status;
	}
	return NT_STATUS_OK;
}

static uint8_t oplock_level(const char *word)
{
	if (strcmp(word, "exclusive") == 0) {
		return SMB2_OPLOCK_LEVEL_EXCLUSIVE;
	}
	if (strcmp(word, "batch") == 0) {
		return SMB2_OPLOCK_LEVEL_BATCH;
	}
	if (strcmp(word, "lease") == 0) {
		return SMB2_OPLOCK_LEVEL_LEASE;
	}
	return SMB2_OPLOCK_LEVEL_NONE;
}

/* The RqLs create context asking for a RWH lease with c's lease key */
static bool lease_blob(struct client *c, TALLOC_CTX *mem_ctx,
		       struct smb2_create_blobs *in_blobs, uint8_t *buf)
{
	struct smb2_lease lease = {
		.lease_key = c->lease_key,
		.lease_state = SMB2_LEASE_READ | SMB2_LEASE_WRITE |
			       SMB2_LEASE_HANDLE,
	};
	NTSTATUS status;

	if (!smb2_lease_push(&lease, buf, 32)) {
		printf("err lease_push\n");
		return false;
	}
	status = smb2_create_blob_add(mem_ctx, in_blobs, SMB2_CREATE_TAG_RQLS,
				      data_blob_const(buf, 32));
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return false;
	}
	return true;
}

/*
 * A durable v2 handle: DH2Q asks for one (a new create GUID), DH2C
 * reconnects the handle fid of create GUID guid.
 */
static bool durable_blob(TALLOC_CTX *mem_ctx,
			 struct smb2_create_blobs *in_blobs, uint8_t *buf,
			 const struct GUID *guid, const uint64_t *fid)
{
	struct GUID_ndr_buf g;
	NTSTATUS status;

	memset(buf, 0, 36);
	status = iotune_guid_to_ndr_buf(guid, &g);
	if (NT_STATUS_IS_OK(status) && fid == NULL) {
		memcpy(buf + 16, g.buf, 16);
		status = smb2_create_blob_add(mem_ctx, in_blobs,
					      SMB2_CREATE_TAG_DH2Q,
					      data_blob_const(buf, 32));
	} else if (NT_STATUS_IS_OK(status)) {
		SBVAL(buf, 0, fid[0]);
		SBVAL(buf, 8, fid[1]);
		memcpy(buf + 16, g.buf, 16);
		status = smb2_create_blob_add(mem_ctx, in_blobs,
					      SMB2_CREATE_TAG_DH2C,
					      data_blob_const(buf, 36));
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return false;
	}
	return true;
}

static void print_open(struct client *c, const struct smb_create_returns *cr,
		       const struct smb2_create_blobs *out_blobs)
{
	struct smb2_lease granted = { 0 };
	struct GUID_txt_buf g;
	bool durable = false;
	uint32_t i;

	for (i = 0; i < out_blobs->num_blobs; i++) {
		const char *tag = out_blobs->blobs[i].tag;

		if (strcmp(tag, SMB2_CREATE_TAG_RQLS) == 0) {
			smb2_lease_pull(out_blobs->blobs[i].data.data,
					out_blobs->blobs[i].data.length,
					&granted);
		}
		durable |= strcmp(tag, SMB2_CREATE_TAG_DH2Q) == 0;
	}
	printf("ok oplock=%u lease=%u durable=%d fid=%llu:%llu guid=%s\n",
	       cr->oplock_level, granted.lease_state, durable,
	       (unsigned long long)c->fid_persistent,
	       (unsigned long long)c->fid_volatile,
	       GUID_buf_string(&c->create_guid, &g));
}

/* fid (persistent, volatile) to reconnect, or NULL for a new open */
static void create_handle(struct client *c, TALLOC_CTX *mem_ctx,
			  const char *name, uint8_t level,
			  uint32_t create_options, bool durable,
			  const uint64_t *fid)
{
	struct smb2_create_blobs in_blobs = { 0 };
	struct smb2_create_blobs out_blobs = { 0 };
	struct smb_create_returns cr = { 0 };
	uint8_t lease_buf[32];
	uint8_t durable_buf[36];
	struct tevent_req *req = NULL;
	NTSTATUS status;

	if (level == SMB2_OPLOCK_LEVEL_LEASE &&
	    !lease_blob(c, mem_ctx, &in_blobs, lease_buf)) {
		return;
	}
	if (durable && !durable_blob(mem_ctx, &in_blobs, durable_buf,
				     &c->create_guid, fid)) {
		return;
	}
	req = smb2cli_create_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				  c->cli->smb2.session, c->cli->smb2.tcon,
				  name, level, SMB2_IMPERSONATION_IMPERSONATION,
				  SEC_FILE_READ_DATA | SEC_FILE_WRITE_DATA |
				  SEC_FILE_READ_ATTRIBUTE |
				  SEC_FILE_WRITE_ATTRIBUTE | SEC_STD_DELETE,
				  FILE_ATTRIBUTE_NORMAL,
				  FILE_SHARE_READ | FILE_SHARE_WRITE |
				  FILE_SHARE_DELETE,
				  FILE_OPEN_IF, create_options, &in_blobs);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = iotune_smb2cli_create_recv(req, &c->fid_persistent,
						    &c->fid_volatile, &cr,
						    mem_ctx, &out_blobs);
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	c->slot[c->cur].persistent = c->fid_persistent;
	c->slot[c->cur].volatile_ = c->fid_volatile;
	print_open(c, &cr, &out_blobs);
}

static void cmd_open(struct client *c, TALLOC_CTX *mem_ctx,
		     const char *name, const char *oplock,
		     uint32_t create_options, bool durable)
{
	c->create_guid = GUID_random();
	create_handle(c, mem_ctx, name, oplock_level(oplock), create_options,
		      durable, NULL);
}

/* reconnect NAME P:V GUID none|lease */
static void cmd_reconnect(struct client *c, TALLOC_CTX *mem_ctx,
			  char **words)
{
	uint64_t fid[2];
	NTSTATUS status;

	if (sscanf(words[2], "%" SCNu64 ":%" SCNu64, &fid[0], &fid[1]) != 2) {
		printf("err a handle is PERSISTENT:VOLATILE\n");
		return;
	}
	status = GUID_from_string(words[3], &c->create_guid);
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	create_handle(c, mem_ctx, words[1], oplock_level(words[4]), 0, true,
		      fid);
}

static void cmd_write(struct client *c, TALLOC_CTX *mem_ctx, uint64_t off,
		      const char *hex)
{
	DATA_BLOB data = strhex_to_data_blob(mem_ctx, hex);
	struct tevent_req *req = NULL;
	uint32_t written = 0;
	NTSTATUS status;

	req = smb2cli_write_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				 c->cli->smb2.session, c->cli->smb2.tcon,
				 data.length, off, c->fid_persistent,
				 c->fid_volatile, 0, 0, data.data);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = smb2cli_write_recv(req, &written);
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	printf("ok %u\n", written);
}

static void cmd_read(struct client *c, TALLOC_CTX *mem_ctx, uint64_t off,
		     uint32_t len)
{
	struct tevent_req *req = NULL;
	uint8_t *data = NULL;
	uint32_t got = 0;
	uint32_t i;
	NTSTATUS status;

	req = smb2cli_read_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				c->cli->smb2.session, c->cli->smb2.tcon, len,
				off, c->fid_persistent, c->fid_volatile, 0, 0);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = smb2cli_read_recv(req, mem_ctx, &data, &got);
	}
	if (NT_STATUS_EQUAL(status, NT_STATUS_END_OF_FILE)) {
		printf("ok \n");
		return;
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	printf("ok ");
	for (i = 0; i < got; i++) {
		printf("%02x", data[i]);
	}
	printf("\n");
}

/*
 * "pump": streams TOTAL bytes from offset 0 in BLOCK-sized writes or reads
 * with DEPTH requests in flight, as real clients do.  For benchmarks.
 * "pump echo" sends an SMB2 ECHO where a write would go: how fast this
 * client and smbd answer a request that does nothing.  When requests
 * fail, the answer is "err STATUS sent BYTES failed OFF...": the offsets
 * of the requests that failed (after the first, no new one is sent; the
 * others in flight are waited for), so a test knows what was
 * acknowledged.
 */
enum pump_kind { PUMP_WRITE, PUMP_READ, PUMP_ECHO };

#define PUMP_FAILED 64

struct pump {
	struct client *c;
	enum pump_kind kind;
	uint64_t total;
	uint32_t block;
	unsigned depth;
	uint8_t *data;
	uint64_t next;		/* offset of the next request */
	uint64_t done;		/* bytes completed */
	unsigned in_flight;
	NTSTATUS status;
	unsigned n_failed;	/* requests that failed, up to PUMP_FAILED */
	uint64_t failed[PUMP_FAILED];	/* ... their offsets */
};

/* one request of a pump: its offset, for the list of failed ones */
struct pump_req {
	struct pump *p;
	uint64_t off;
};

static void pump_done(struct tevent_req *req);

static void pump_fill(struct pump *p)
{
	struct client *c = p->c;
	struct tevent_req *req = NULL;
	struct pump_req *pr = NULL;
	uint32_t len;

	while (NT_STATUS_IS_OK(p->status) && p->in_flight < p->depth &&
	       p->next < p->total) {
		len = MIN(p->block, p->total - p->next);
		if (p->kind == PUMP_ECHO) {
			req = smb2cli_echo_send(p, c->ev, c->cli->conn,
						c->timeout);
		} else if (p->kind == PUMP_WRITE) {
			req = smb2cli_write_send(p, c->ev, c->cli->conn,
						 c->timeout,
						 c->cli->smb2.session,
						 c->cli->smb2.tcon, len,
						 p->next, c->fid_persistent,
						 c->fid_volatile, 0, 0,
						 p->data);
		} else {
			req = smb2cli_read_send(p, c->ev, c->cli->conn,
						c->timeout,
						c->cli->smb2.session,
						c->cli->smb2.tcon, len,
						p->next, c->fid_persistent,
						c->fid_volatile, 0, 0);
		}
		pr = req != NULL ? talloc(req, struct pump_req) : NULL;
		if (pr == NULL) {
			TALLOC_FREE(req);
			p->status = NT_STATUS_NO_MEMORY;
			return;
		}
		*pr = (struct pump_req) { .p = p, .off = p->next };
		tevent_req_set_callback(req, pump_done, pr);
		p->next += len;
		p->in_flight++;
	}
}

static void pump_done(struct tevent_req *req)
{
	struct pump_req *pr = tevent_req_callback_data(req, struct pump_req);
	struct pump *p = pr->p;
	uint64_t off = pr->off;
	uint8_t *data = NULL;
	uint32_t n = 0;
	NTSTATUS status;

	if (p->kind == PUMP_ECHO) {
		status = smb2cli_echo_recv(req);
		n = (uint32_t)MIN(p->block, p->total - p->done);
	} else if (p->kind == PUMP_WRITE) {
		status = smb2cli_write_recv(req, &n);
	} else {
		status = smb2cli_read_recv(req, p, &data, &n);
	}
	TALLOC_FREE(req);
	p->in_flight--;
	if (!NT_STATUS_IS_OK(status)) {
		p->status = status;
		if (p->n_failed < PUMP_FAILED) {
			p->failed[p->n_failed++] = off;
		}
		return;
	}
	p->done += n;
	pump_fill(p);
}

static void cmd_pump(struct client *c, TALLOC_CTX *mem_ctx, char **words)
{
	struct pump *p = talloc_zero(mem_ctx, struct pump);
	struct timespec start, end;
	uint32_t i;

	if (p == NULL) {
		printf("err no memory\n");
		return;
	}
	p->c = c;
	p->kind = strcmp(words[1], "write") == 0 ? PUMP_WRITE :
		  strcmp(words[1], "echo") == 0 ? PUMP_ECHO : PUMP_READ;
	p->total = strtoull(words[2], NULL, 10);
	p->block = (uint32_t)strtoul(words[3], NULL, 10);
	p->depth = (unsigned)strtoul(words[4], NULL, 10);
	p->status = NT_STATUS_OK;
	p->data = talloc_array(p, uint8_t, p->block);
	if (p->data == NULL || p->block == 0 || p->depth == 0) {
		printf("err bad arguments\n");
		return;
	}
	for (i = 0; i < p->block; i++) {
		p->data[i] = (uint8_t)(i * 2654435761u >> 24);
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	pump_fill(p);
	while (p->in_flight > 0) {
		if (tevent_loop_once(c->ev) != 0) {
			p->status = map_nt_error_from_unix(errno);
			break;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	if (!NT_STATUS_IS_OK(p->status)) {
		/* the failed requests' offsets: what the client was told */
		printf("err %s sent %llu failed", nt_errstr(p->status),
		       (unsigned long long)p->next);
		for (i = 0; i < p->n_failed; i++) {
			printf(" %llu", (unsigned long long)p->failed[i]);
		}
		printf("\n");
		return;
	}
	printf("ok %llu %llu\n", (unsigned long long)p->done,
	       (unsigned long long)((end.tv_sec - start.tv_sec) * 1000000LL +
				    (end.tv_nsec - start.tv_nsec) / 1000));
}

static void print_status(struct client *c, struct tevent_req *req,
			 NTSTATUS (*recv)(struct tevent_req *req))
{
	NTSTATUS status = client_wait(c, req);

	if (NT_STATUS_IS_OK(status)) {
		status = recv(req);
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	printf("ok\n");
}

/* SET_INFO of a file information class on the open handle */
static void set_file_info(struct client *c, TALLOC_CTX *mem_ctx,
			  uint8_t level, uint8_t *buf, size_t len)
{
	DATA_BLOB blob = data_blob_const(buf, len);
	struct tevent_req *req = NULL;

	req = smb2cli_set_info_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				    c->cli->smb2.session, c->cli->smb2.tcon,
				    SMB2_0_INFO_FILE, level, &blob, 0,
				    c->fid_persistent, c->fid_volatile);
	print_status(c, req, smb2cli_set_info_recv);
}

static void cmd_truncate(struct client *c, TALLOC_CTX *mem_ctx,
			 uint64_t size)
{
	uint8_t buf[8];

	SBVAL(buf, 0, size);
	set_file_info(c, mem_ctx, FSCC_FILE_END_OF_FILE_INFORMATION, buf,
		      sizeof(buf));
}

static NTSTATUS close_recv(struct tevent_req *req)
{
	return smb2cli_close_recv(req);
}

static void cmd_close(struct client *c, TALLOC_CTX *mem_ctx)
{
	struct tevent_req *req = NULL;

	req = smb2cli_close_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				 c->cli->smb2.session, c->cli->smb2.tcon, 0,
				 c->fid_persistent, c->fid_volatile);
	print_status(c, req, close_recv);
}

static void break_timer(struct tevent_context *ev, struct tevent_timer *te,
			struct timeval now, void *private_data)
{
	struct tevent_timer **timer = private_data;

	*timer = NULL;	/* tevent frees a timer that fired */
}

static void cmd_break(struct client *c, TALLOC_CTX *mem_ctx, unsigned ms)
{
	struct tevent_timer *te = NULL;

	te = tevent_add_timer(c->ev, mem_ctx,
			      tevent_timeval_current_ofs(ms / 1000,
							 (ms % 1000) * 1000),
			      break_timer, &te);
	while (c->breaks_seen == c->breaks_reported && te != NULL) {
		if (tevent_loop_once(c->ev) != 0) {
			break;
		}
	}
	TALLOC_FREE(te);
	if (c->breaks_seen == c->breaks_reported) {
		printf("ok none\n");
		return;
	}
	c->breaks_reported = c->breaks_seen;
	if (c->break_is_lease) {
		printf("ok lease %u->%u\n", c->break_cur, c->break_new);
	} else {
		printf("ok oplock %u\n", c->break_oplock);
	}
}

static NTSTATUS ack_recv(struct tevent_req *req)
{
	return smb2cli_req_recv(req, NULL, NULL, NULL, 0);
}

static struct tevent_req *client_ack_send(struct client *c,
					  TALLOC_CTX *mem_ctx)
{
	uint8_t body[36] = { 0 };
	size_t len;

	if (c->break_is_lease) {
		SSVAL(body, 0, 36);
		memcpy(body + 8, &c->lease_key, 16);
		SIVAL(body, 24, c->break_new);
		len = 36;
	} else {
		SSVAL(body, 0, 24);
		SCVAL(body, 2, c->break_oplock);
		SBVAL(body, 8, c->break_fid_persistent);
		SBVAL(body, 16, c->break_fid_volatile);
		len = 24;
	}
	c->got_break = false;
	return smb2cli_req_send(mem_ctx, c->ev, c->cli->conn, SMB2_OP_BREAK,
				0, 0, c->timeout, c->cli->smb2.tcon,
				c->cli->smb2.session, body, len, NULL, 0, 0);
}

static void cmd_ack(struct client *c, TALLOC_CTX *mem_ctx)
{
	if (!c->got_break) {
		printf("err no break to acknowledge\n");
		return;
	}
	print_status(c, client_ack_send(c, mem_ctx), ack_recv);
}

static NTSTATUS flush_recv(struct tevent_req *req)
{
	return smb2cli_flush_recv(req);
}

static NTSTATUS echo_recv(struct tevent_req *req)
{
	return smb2cli_echo_recv(req);
}

/* SET_INFO FileBasicInformation with only LastWriteTime set */
static void cmd_settime(struct client *c, TALLOC_CTX *mem_ctx,
			uint64_t nttime)
{
	uint8_t buf[40] = { 0 };

	SBVAL(buf, 16, nttime);
	set_file_info(c, mem_ctx, FSCC_FILE_BASIC_INFORMATION, buf,
		      sizeof(buf));
}

/* GETINFO FileNetworkOpenInformation of the open handle */
static void cmd_getinfo(struct client *c, TALLOC_CTX *mem_ctx)
{
	struct tevent_req *req = NULL;
	DATA_BLOB out = data_blob_null;
	NTSTATUS status;

	req = smb2cli_query_info_send(mem_ctx, c->ev, c->cli->conn,
				      c->timeout, c->cli->smb2.session,
				      c->cli->smb2.tcon, SMB2_0_INFO_FILE,
				      FSCC_FILE_NETWORK_OPEN_INFORMATION,
				      0xffff, NULL, 0, 0, c->fid_persistent,
				      c->fid_volatile);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = smb2cli_query_info_recv(req, mem_ctx, &out);
	}
	if (NT_STATUS_IS_OK(status) && out.length < 56) {
		status = NT_STATUS_INVALID_NETWORK_RESPONSE;
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	printf("ok size=%llu mtime=%llu alloc=%llu\n",
	       (unsigned long long)BVAL(out.data, 40),
	       (unsigned long long)BVAL(out.data, 16),
	       (unsigned long long)BVAL(out.data, 32));
}

/* Opens name with fixed arguments; false (and "err") on failure */
static bool open_plain(struct client *c, TALLOC_CTX *mem_ctx,
		       const char *name, uint32_t access,
		       uint32_t create_options, uint64_t *fid_p,
		       uint64_t *fid_v, struct smb_create_returns *cr)
{
	struct tevent_req *req = NULL;
	NTSTATUS status;

	req = smb2cli_create_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				  c->cli->smb2.session, c->cli->smb2.tcon,
				  name, SMB2_OPLOCK_LEVEL_NONE,
				  SMB2_IMPERSONATION_IMPERSONATION, access,
				  FILE_ATTRIBUTE_NORMAL,
				  FILE_SHARE_READ | FILE_SHARE_WRITE |
				  FILE_SHARE_DELETE, FILE_OPEN,
				  create_options, NULL);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = iotune_smb2cli_create_recv(req, fid_p, fid_v, cr,
						    mem_ctx, NULL);
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return false;
	}
	return true;
}

static void close_plain(struct client *c, TALLOC_CTX *mem_ctx,
			uint64_t fid_p, uint64_t fid_v)
{
	struct tevent_req *req = NULL;

	req = smb2cli_close_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				 c->cli->smb2.session, c->cli->smb2.tcon, 0,
				 fid_p, fid_v);
	(void)client_wait(c, req);
}

/* A stat open: what CREATE says of the file's size */
static void cmd_stat(struct client *c, TALLOC_CTX *mem_ctx,
		     const char *name)
{
	struct smb_create_returns cr = { 0 };
	uint64_t fid_p;
	uint64_t fid_v;

	if (!open_plain(c, mem_ctx, name, SEC_FILE_READ_ATTRIBUTE, 0,
			&fid_p, &fid_v, &cr)) {
		return;
	}
	close_plain(c, mem_ctx, fid_p, fid_v);
	printf("ok size=%llu alloc=%llu\n",
	       (unsigned long long)cr.end_of_file,
	       (unsigned long long)cr.allocation_size);
}

/* FileDirectoryInformation entries of the share's root: NAME=SIZE */
static void print_dir_entries(TALLOC_CTX *mem_ctx, const uint8_t *p,
			      uint32_t len, bool alloc)
{
	uint32_t pos = 0;

	while (pos + 64 <= len) {
		uint32_t next = IVAL(p, pos);
		uint32_t name_len = IVAL(p, pos + 60);
		char *name = NULL;
		size_t converted = 0;

		if (pos + 64 + name_len > len) {
			break;
		}
		if (convert_string_talloc(mem_ctx, CH_UTF16LE, CH_UNIX,
					  p + pos + 64, name_len, &name,
					  &converted)) {
			printf(" %s=%llu", name,
			       (unsigned long long)BVAL(p, pos + 40));
			if (alloc) {
				printf("/%llu", (unsigned long long)
				       BVAL(p, pos + 48));
			}
		}
		if (next == 0) {
			break;
		}
		pos += next;
	}
}

static void cmd_list(struct client *c, TALLOC_CTX *mem_ctx,
		     const char *pattern, bool alloc)
{
	struct smb_create_returns cr = { 0 };
	struct tevent_req *req = NULL;
	uint8_t *data = NULL;
	uint32_t len = 0;
	uint64_t fid_p;
	uint64_t fid_v;
	NTSTATUS status;

	if (!open_plain(c, mem_ctx, "", SEC_DIR_LIST | SEC_FILE_READ_ATTRIBUTE,
			FILE_DIRECTORY_FILE, &fid_p, &fid_v, &cr)) {
		return;
	}
	req = smb2cli_query_directory_send(mem_ctx, c->ev, c->cli->conn,
					   c->timeout, c->cli->smb2.session,
					   c->cli->smb2.tcon,
					   SMB2_FIND_DIRECTORY_INFO, 0, 0,
					   fid_p, fid_v, pattern, 65536);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = smb2cli_query_directory_recv(req, mem_ctx, &data,
						      &len);
	}
	close_plain(c, mem_ctx, fid_p, fid_v);
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	printf("ok");
	print_dir_entries(mem_ctx, data, len, alloc);
	printf("\n");
}

static void cmd_leasekey(struct client *c, const char *hex)
{
	DATA_BLOB key = strhex_to_data_blob(NULL, hex);

	if (key.length != sizeof(c->lease_key.data)) {
		printf("err a lease key is 32 hex digits\n");
		data_blob_free(&key);
		return;
	}
	memcpy(c->lease_key.data, key.data, key.length);
	data_blob_free(&key);
	printf("ok\n");
}

/* Each command: its name, how many words it takes at least, what it does */
typedef void (*command_fn)(struct client *c, TALLOC_CTX *mem_ctx,
			   char **words, int n);

static bool has_word(char **w, int n, const char *word)
{
	int i;

	for (i = 3; i < n; i++) {
		if (strcmp(w[i], word) == 0) {
			return true;
		}
	}
	return false;
}

static void do_open(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_open(c, m, w[1], w[2],
		 has_word(w, n, "unbuffered") ?
		 FILE_NO_INTERMEDIATE_BUFFERING : 0,
		 has_word(w, n, "durable"));
}

static void do_reconnect(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_reconnect(c, m, w);
}

static void do_write(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_write(c, m, strtoull(w[1], NULL, 10), w[2]);
}

static void do_read(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_read(c, m, strtoull(w[1], NULL, 10),
		 (uint32_t)strtoul(w[2], NULL, 10));
}

static void do_flush(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	print_status(c, smb2cli_flush_send(m, c->ev, c->cli->conn,
					   c->timeout, c->cli->smb2.session,
					   c->cli->smb2.tcon,
					   c->fid_persistent, c->fid_volatile),
		     flush_recv);
}

static void do_echo(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	print_status(c, smb2cli_echo_send(m, c->ev, c->cli->conn,
					  c->timeout),
		     echo_recv);
}

static void do_pump(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_pump(c, m, w);
}

static void do_truncate(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_truncate(c, m, strtoull(w[1], NULL, 10));
}

static void do_close(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_close(c, m);
}

static void do_break(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_break(c, m, (unsigned)strtoul(w[1], NULL, 10));
}

static void do_ack(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_ack(c, m);
}

static void do_settime(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_settime(c, m, strtoull(w[1], NULL, 10));
}

static void do_getinfo(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_getinfo(c, m);
}

static void do_stat(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_stat(c, m, w[1]);
}

static void do_list(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_list(c, m, w[1], n > 2 && strcmp(w[2], "alloc") == 0);
}

/* One open (batch oplock), write of data at 0, close of name */
static NTSTATUS one_cycle(struct client *c, TALLOC_CTX *mem_ctx,
			  const char *name, const DATA_BLOB *data)
{
	struct smb_create_returns cr = { 0 };
	struct tevent_req *req = NULL;
	uint64_t fid_p = 0;
	uint64_t fid_v = 0;
	uint32_t written = 0;
	NTSTATUS status;

	req = smb2cli_create_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				  c->cli->smb2.session, c->cli->smb2.tcon,
				  name, SMB2_OPLOCK_LEVEL_BATCH,
				  SMB2_IMPERSONATION_IMPERSONATION,
				  SEC_FILE_READ_DATA | SEC_FILE_WRITE_DATA,
				  FILE_ATTRIBUTE_NORMAL,
				  FILE_SHARE_READ | FILE_SHARE_WRITE,
				  FILE_OPEN_IF, 0, NULL);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = iotune_smb2cli_create_recv(req, &fid_p, &fid_v,
						    &cr, mem_ctx, NULL);
	}
	if (!NT_STATUS_IS_OK(status)) {
		return status;
	}
	req = smb2cli_write_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				 c->cli->smb2.session, c->cli->smb2.tcon,
				 data->length, 0, fid_p, fid_v, 0, 0,
				 data->data);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = smb2cli_write_recv(req, &written);
	}
	req = smb2cli_close_send(mem_ctx, c->ev, c->cli->conn, c->timeout,
				 c->cli->smb2.session, c->cli->smb2.tcon, 0,
				 fid_p, fid_v);
	if (NT_STATUS_IS_OK(status)) {
		status = client_wait(c, req);
	} else {
		(void)client_wait(c, req);
	}
	return status;
}

/* cycles NAME COUNT SIZE: "ok COUNT USEC" of COUNT one_cycle()s */
static void do_cycles(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	unsigned long count = strtoul(w[2], NULL, 10);
	DATA_BLOB data = data_blob_talloc_zero(m, strtoul(w[3], NULL, 10));
	struct timespec start, end;
	NTSTATUS status = NT_STATUS_OK;
	unsigned long i;

	memset(data.data, 'c', data.length);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 0; i < count && NT_STATUS_IS_OK(status); i++) {
		TALLOC_CTX *frame = talloc_new(m);

		status = one_cycle(c, frame, w[1], &data);
		TALLOC_FREE(frame);
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	printf("ok %lu %lld\n", count,
	       (long long)(end.tv_sec - start.tv_sec) * 1000000 +
	       (end.tv_nsec - start.tv_nsec) / 1000);
}

/* A second tree connect on the same session: "ok tree=N" */
static void do_tcon(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	struct smbXcli_tcon *tcon = NULL;
	struct tevent_req *req = NULL;
	char *unc = NULL;
	NTSTATUS status;

	if (c->n_trees >= ARRAY_SIZE(c->trees)) {
		printf("err too many trees\n");
		return;
	}
	tcon = smbXcli_tcon_create(c);
	unc = talloc_asprintf(m, "\\\\%s\\%s",
			      smbXcli_conn_remote_name(c->cli->conn), w[1]);
	if (tcon == NULL || unc == NULL) {
		printf("err no memory\n");
		return;
	}
	req = smb2cli_tcon_send(m, c->ev, c->cli->conn, c->timeout,
				c->cli->smb2.session, tcon, 0, unc);
	status = client_wait(c, req);
	if (NT_STATUS_IS_OK(status)) {
		status = smb2cli_tcon_recv(req);
	}
	if (!NT_STATUS_IS_OK(status)) {
		printf("err %s\n", nt_errstr(status));
		return;
	}
	c->trees[c->n_trees] = tcon;
	printf("ok tree=%u\n", c->n_trees++);
}

/* Later calls go to tree N (handles belong to the tree they came from) */
static void do_tree(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	unsigned t = (unsigned)strtoul(w[1], NULL, 10);

	if (t >= c->n_trees) {
		printf("err no tree %u\n", t);
		return;
	}
	c->cli->smb2.tcon = c->trees[t];
	printf("ok\n");
}

static void do_leasekey(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	cmd_leasekey(c, w[1]);
}

static void do_autoack(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	c->autoack = true;
	printf("ok\n");
}

static void do_use(struct client *c, TALLOC_CTX *m, char **w, int n)
{
	unsigned slot = (unsigned)strtoul(w[1], NULL, 10);

	if (slot >= ARRAY_SIZE(c->slot)) {
		printf("err no slot %u\n", slot);
		return;
	}
	c->cur = slot;
	c->fid_persistent = c->slot[slot].persistent;
	c->fid_volatile = c->slot[slot].volatile_;
	printf("ok\n");
}

static const struct {
	const char *name;
	int words;
	command_fn fn;
} commands[] = {
	{ "open", 3, do_open },
	{ "reconnect", 5, do_reconnect },
	{ "write", 3, do_write },
	{ "read", 3, do_read },
	{ "flush", 1, do_flush },
	{ "pump", 5, do_pump },
	{ "truncate", 2, do_truncate },
	{ "close", 1, do_close },
	{ "echo", 1, do_echo },
	{ "break", 2, do_break },
	{ "ack", 1, do_ack },
	{ "settime", 2, do_settime },
	{ "getinfo", 1, do_getinfo },
	{ "stat", 2, do_stat },
	{ "list", 2, do_list },
	{ "leasekey", 2, do_leasekey },
	{ "autoack", 1, do_autoack },
	{ "use", 2, do_use },
	{ "tcon", 2, do_tcon },
	{ "cycles", 4, do_cycles },
	{ "tree", 2, do_tree },
};

static void run_command(struct client *c, char *line)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *words[5] = { NULL };
	char *save = NULL;
	char *w = NULL;
	int n = 0;
	size_t i;

	for (w = strtok_r(line, " \n", &save); w != NULL && n < 5;
	     w = strtok_r(NULL, " \n", &save)) {
		words[n++] = w;
	}
	for (i = 0; n > 0 && i < ARRAY_SIZE(commands); i++) {
		if (strcmp(words[0], commands[i].name) == 0 &&
		    n >= commands[i].words) {
			commands[i].fn(c, frame, words, n);
			break;
		}
	}
	if (n == 0 || i == ARRAY_SIZE(commands)) {
		printf("err unknown command\n");
	}
	fflush(stdout);
	TALLOC_FREE(frame);
}

int main(int argc, const char **argv)
{
	TALLOC_CTX *frame = talloc_stackframe();
	struct client *c = NULL;
	struct cli_credentials *creds = NULL;
	char *line = NULL;
	size_t cap = 0;
	NTSTATUS status;

	if (argc != 6) {
		fprintf(stderr, "usage: %s CONFIGFILE HOST SHARE USER "
			"PASSWORD\n", argv[0]);
		return 2;
	}
	smb_init_locale();
	if (!lp_load_global(argv[1])) {
		fprintf(stderr, "cannot load %s\n", argv[1]);
		return 2;
	}
	c = talloc_zero(frame, struct client);
	c->ev = samba_tevent_context_init(c);
	creds = cli_session_creds_init(c, argv[4], lp_workgroup(), NULL,
				       argv[5], false, false, false, false);
	if (c->ev == NULL || creds == NULL) {
		return 2;
	}
	status = iotune_cli_full_connection_creds(c, &c->cli, NULL, argv[2],
						  NULL, 445, argv[3], "?????",
						  creds, 0);
	if (!NT_STATUS_IS_OK(status)) {
		fprintf(stderr, "connect: %s\n", nt_errstr(status));
		return 1;
	}
	if (smbXcli_conn_protocol(c->cli->conn) < PROTOCOL_SMB2_10) {
		fprintf(stderr, "SMB2.1 or later needed\n");
		return 1;
	}
	c->timeout = 60000;
	c->trees[0] = c->cli->smb2.tcon;
	c->n_trees = 1;
	c->lease_key.data[0] = (uint64_t)getpid();
	c->lease_key.data[1] = (uint64_t)time(NULL);
	if (!client_arm_break(c)) {
		fprintf(stderr, "cannot arm the break request\n");
		return 1;
	}
	printf("ok ready\n");
	fflush(stdout);
	while (getline(&line, &cap, stdin) > 0) {
		if (strncmp(line, "quit", 4) == 0) {
			break;
		}
		run_command(c, line);
	}
	free(line);
	TALLOC_FREE(frame);
	return 0;
}
