/* The seccomp proof from C: a thread in no-syscall mode records events over many sub-buffer
 * switches under a filter that traps every system call; it must trap none.
 * Usage (session from the environment): seccomp <events> */
#include <hushtrace.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long events;
static volatile uint64_t trapped = 999;
static volatile int setup = -100;

static void *rt(void *arg) {
    long i;
    static const char *const names[4] = {"zero", "one", "two", "three"};
    (void)arg;
    ht_set_thread_name("c-rt");
    if (ht_set_thread_no_syscall() != 0) {
        setup = -1;
        return NULL;
    }
    if (ht_verify_trap_syscalls_on_this_thread() != 0) {
        setup = -2;
        return NULL;
    }
    setup = 0;
    /* From here on: no system call (no printf), or it is trapped and counted. */
    for (i = 0; i < events; i++) {
        HT_SPAN_BEGIN("rt", "cycle", HT_U64("i", (uint64_t)i));
        HT_EVENT("rt", "sample", HT_F64("v", i * 0.5), HT_STR("s", names[i & 3]),
                 HT_BOOL("odd", i & 1), HT_I32("k", (int32_t)-i));
        HT_COUNTER("rt", "level", i & 255);
        HT_SPAN_END("rt", "cycle");
    }
    trapped = ht_verify_trapped_syscalls();
    ht_verify_exit_thread();
}

int main(int argc, char **argv) {
    pthread_t th;
    int r;
    if (argc != 2) return 2;
    events = atol(argv[1]);
    r = ht_start_from_env();
    if (r != 0) {
        fprintf(stderr, "ht_start_from_env: %d %s\n", r, ht_last_error());
        return 1;
    }
    pthread_create(&th, NULL, rt, NULL);
    pthread_join(th, NULL);
    printf("setup %d trapped %llu\n", setup, (unsigned long long)trapped);
    return setup == 0 && trapped == 0 ? 0 : 1;
}
