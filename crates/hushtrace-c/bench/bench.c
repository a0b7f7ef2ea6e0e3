/* One event with two 32-bit ints, recorded `n` times per round, `rounds` rounds, written to
 * disk: the hushtrace C tracepoint (mode `ht`) or LTTng-UST's lttng_ust_tracepoint (mode
 * `lttng`, with a session the script set up). Prints: <mode> min_ns median_ns events.
 * Usage: bench ht <dir> <n> <rounds>  |  bench lttng - <n> <rounds> */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef WITH_LTTNG
#include "htbench_tp.h"
#endif
#include <hushtrace.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    long n, rounds, r, i;
    double per[64];
    int ht;
    ht_session *s = NULL;
    ht_stats st = {0, 0};
    if (argc != 5) return 2;
    ht = strcmp(argv[1], "ht") == 0;
    n = atol(argv[3]);
    rounds = atol(argv[4]);
    if (rounds < 1 || rounds > 64) return 2;
    if (ht) {
        s = ht_session_start(argv[2]);
        if (s == NULL) {
            fprintf(stderr, "%s\n", ht_last_error());
            return 1;
        }
        ht_init_thread();
    }
    for (r = 0; r < rounds; r++) {
        double t0 = now_ns();
        if (ht) {
            for (i = 0; i < n; i++) HT_EVENT("htbench", "ints", HT_I32("a", i), HT_I32("b", 2 * i));
        } else {
#ifdef WITH_LTTNG
            for (i = 0; i < n; i++) lttng_ust_tracepoint(htbench, ints, (int)i, (int)(2 * i));
#else
            return 2;
#endif
        }
        per[r] = (now_ns() - t0) / n;
        /* Let the consumer drain between rounds, as for every tracer. */
        {
            struct timespec pause = {0, 50 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    if (ht && ht_session_stop(s, &st) != 0) {
        fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    qsort(per, rounds, sizeof per[0], cmp);
    printf("%s %.2f %.2f written %llu discarded %llu\n", argv[1], per[0], per[rounds / 2],
           (unsigned long long)st.events_written, (unsigned long long)st.events_discarded);
    return 0;
}
