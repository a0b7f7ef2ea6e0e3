/* Loads plugin.so after the session started; calls it, dlcloses it, loads it again.
 * Usage: dlopen <dir> <plugin.so> <n> */
#include <dlfcn.h>
#include <hushtrace.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    ht_session *s;
    ht_stats st;
    void *h;
    int (*run)(int);
    int n, total = 0, round;
    if (argc != 4) return 2;
    n = atoi(argv[3]);
    s = ht_session_start(argv[1]);
    if (s == NULL) {
        fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    HT_EVENT("main", "started");
    for (round = 0; round < 2; round++) {
        h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        *(void **)(&run) = dlsym(h, "plugin_run");
        if (run == NULL) return 1;
        total += run(n);
        dlclose(h); /* the library stays mapped (pinned by its registration) */
    }
    if (ht_session_stop(s, &st) != 0) {
        fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    printf("total %d written %llu\n", total, (unsigned long long)st.events_written);
    return 0;
}
