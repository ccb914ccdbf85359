// SPDX-License-Identifier: MIT
/* Description: the reads a request keeps in flight. share_qd cuts what a request may have alone between the users running requests and each user's own requests (8 at least); uring_rw_cb_qd keeps at most its qd of new reads in flight: of 16 reads of empty pipes with qd 4, the last can complete only after 12 others have, even when its pipe is the first to get data. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/uring.h"
#include "place/share.h"
#include "t_unit.h"

#define N 16
#define QD 4

static int fds[N][2];
static char bytes[N];
static struct uring_op ops[N];
static unsigned ncompleted, seen_at[N]; /* completions before op i's, in this thread */
static int rw_ret = -1;

static void done(void *arg, size_t i)
{
	(void)arg;
	seen_at[i] = ncompleted++;
}

static void *run(void *arg)
{
	(void)arg;
	rw_ret = uring_rw_cb_qd(ops, N, QD, done, NULL);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void shares(void)
{
	struct share s;

	share_init(&s);
	T_EQ(share_qd(NULL, 0, 256), 256); /* no share: all of it */
	T_EQ(share_qd(&s, 1000, 256), 256); /* nobody running: all of it */
	share_enter(&s, 1000);
	T_EQ(share_qd(&s, 1000, 256), 256); /* alone */
	share_enter(&s, 2000);
	T_EQ(share_qd(&s, 1000, 256), 128); /* two users: half each */
	T_EQ(share_qd(&s, 2000, 256), 128);
	share_enter(&s, 2000);
	share_enter(&s, 2000);
	share_enter(&s, 2000);
	T_EQ(share_qd(&s, 2000, 256), 32); /* a user's 4 requests: its half in 4 */
	T_EQ(share_qd(&s, 1000, 256), 128); /* the other user keeps half */
	for (int i = 0; i < 60; i++)
		share_enter(&s, 2000);
	T_EQ(share_qd(&s, 2000, 256), 8); /* never below 8 */
	T_EQ(share_qd(&s, 1000, 256), 128);
	for (int i = 0; i < 64; i++)
		share_leave(&s, 2000);
	T_EQ(share_qd(&s, 1000, 256), 256); /* the other user gone: all again */
	share_leave(&s, 1000);
	share_free(&s);
}

int main(void)
{
	pthread_t t;

	shares();
	for (int i = 0; i < N; i++) {
		if (pipe(fds[i])) {
			perror("pipe");
			return 1;
		}
		ops[i] = (struct uring_op){ .fd = fds[i][0], .buf = &bytes[i], .len = 1 };
	}
	if (pthread_create(&t, NULL, run, NULL))
		return 1;
	sleep_ms(50);
	/* the last read's pipe gets its byte first: it must still wait for its turn */
	if (write(fds[N - 1][1], "z", 1) != 1)
		return 1;
	sleep_ms(50);
	for (int i = 0; i < N - 1; i++) {
		char c = (char)('a' + i);

		if (write(fds[i][1], &c, 1) != 1)
			return 1;
		sleep_ms(2);
	}
	pthread_join(t, NULL);
	if (rw_ret == -ENOSYS || rw_ret == -EPERM) {
		printf("unit_qd: io_uring not available here (%s)\n", strerror(-rw_ret));
		return 77;
	}
	T_EQ(rw_ret, 0);
	T_EQ(ncompleted, N);
	for (int i = 0; i < N - 1; i++)
		T_EQ(bytes[i], 'a' + i);
	T_EQ(bytes[N - 1], 'z');
	/* with QD in flight, the last op went out only once N - QD others had completed */
	T_CHECK(seen_at[N - 1] >= N - QD, "the last read completed after %u others (qd %d of %d)",
		seen_at[N - 1], QD, N);
	for (int i = 0; i < N; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	return t_done("unit_qd");
}
