/* Deadlines of C spans (issue 31): run with HUSHTRACE_OUTPUT=<dir> and
 * HUSHTRACE_ON_LATE='c:ruled>1ms,c:wide>1ms'. Four spans: `c:ruled` (HT_SPAN_END, the rule's
 * deadline) and `c:wide` (three fields: the array path) last 20 ms past a 1 ms deadline;
 * `c:declared` ends with HT_SPAN_END_DEADLINE's 1 ms, also 20 ms late; `c:punctual` has an
 * hour. Then it waits (at most a minute) for three lines in <dir>/late/index.json, prints how
 * many it saw, and exits (the session stops at exit()). Usage: late <dir> */
#define _POSIX_C_SOURCE 200809L
#include <hushtrace.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&t, &t) != 0) {
    }
}

static int index_lines(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/late/index.json", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int r = ht_start_from_env();
    if (r != 0) {
        printf("start: %d %s\n", r, ht_last_error());
        return 1;
    }
    HT_SPAN_BEGIN("c", "ruled", HT_U64("i", 1));
    sleep_ms(20);
    HT_SPAN_END("c", "ruled");
    sleep_ms(20);

    HT_SPAN_BEGIN("c", "declared");
    HT_SPAN_BEGIN("c", "punctual");
    HT_SPAN_END_DEADLINE("c", "punctual", 3600ull * 1000000000ull);
    sleep_ms(20);
    HT_SPAN_END_DEADLINE("c", "declared", 1000000u);
    sleep_ms(20);

    HT_SPAN_BEGIN("c", "wide", HT_U64("a", 1), HT_I64("b", -2), HT_STR("c", "three"));
    sleep_ms(20);
    HT_SPAN_END("c", "wide");

    int n = 0;
    for (int i = 0; i < 6000 && (n = index_lines(argv[1])) < 3; i++) sleep_ms(10);
    printf("index lines: %d\n", n);
    return 0;
}
