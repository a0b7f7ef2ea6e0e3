/* Several threads record every field type, spans and counters; the test checks counts and
 * values with babeltrace2. Usage: threads <dir> <threads> <iterations> */
#include <hushtrace.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static long iterations;

static void *worker(void *arg) {
    long t = (long)arg;
    char name[16];
    char s[64];
    long i;
    snprintf(name, sizeof name, "cw-%ld", t);
    ht_set_thread_name(name);
    ht_init_thread();
    for (i = 0; i < iterations; i++) {
        snprintf(s, sizeof s, "t%ld-%ld", t, i);
        HT_SPAN_BEGIN("c", "iter", HT_I64("i", i));
        HT_EVENT("c", "all", HT_I64("i64", -i), HT_U64("u64", (uint64_t)i * 1000000007u),
                 HT_I32("i32", (int32_t)-i), HT_U32("u32", (uint32_t)i), HT_F64("f64", i / 4.0),
                 HT_BOOL("ok", i % 3 == 0), HT_STR("s", s), HT_I64("t", t));
        HT_COUNTER("c", "depth", i);
        HT_SPAN_END("c", "iter");
    }
    return NULL;
}

int main(int argc, char **argv) {
    ht_session *s;
    ht_stats st;
    pthread_t th[16];
    long n, t;
    if (argc != 4) return 2;
    n = atol(argv[2]);
    iterations = atol(argv[3]);
    if (n < 1 || n > 16) return 2;
    s = ht_session_start(argv[1]);
    if (s == NULL) {
        fprintf(stderr, "ht_session_start: %s\n", ht_last_error());
        return 1;
    }
    HT_EVENT("c", "empty");
    for (t = 0; t < n; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (t = 0; t < n; t++) pthread_join(th[t], NULL);
    if (ht_session_stop(s, &st) != 0) {
        fprintf(stderr, "ht_session_stop: %s\n", ht_last_error());
        return 1;
    }
    printf("written %llu discarded %llu\n", (unsigned long long)st.events_written,
           (unsigned long long)st.events_discarded);
    return 0;
}
