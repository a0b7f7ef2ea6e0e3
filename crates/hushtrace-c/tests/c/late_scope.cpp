// Deadlines of C++ scopes (issue 31): run with HUSHTRACE_OUTPUT=<dir> and
// HUSHTRACE_ON_LATE='cpp:*>1ms'. `cpp:outer` holds `cpp:quick` (ends at once) and lasts 20 ms;
// HT_SPAN_END_DEADLINE gives `cpp:inline` an hour, which the rule overrides; it lasts 20 ms
// too. Then it waits (at most a minute) for two lines in <dir>/late/index.json, prints how many
// it saw, and exits. `cpp:quick` may be late only if the machine stalls it past 1 ms, so the
// test checks that the late spans include `cpp:outer` and `cpp:inline`. Usage: late_scope <dir>
#include <hushtrace.h>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

static int index_lines(const std::string &dir) {
    std::ifstream f(dir + "/late/index.json");
    int n = 0;
    std::string line;
    while (std::getline(f, line)) n++;
    return n;
}

static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int r = ht_start_from_env();
    if (r != 0) {
        std::printf("start: %d %s\n", r, ht_last_error());
        return 1;
    }
    {
        HT_SCOPE("cpp", "outer", HT_I64("i", 1));
        { HT_SCOPE("cpp", "quick"); }
        sleep_ms(20);
    }
    sleep_ms(20);
    HT_SPAN_BEGIN("cpp", "inline");
    sleep_ms(20);
    HT_SPAN_END_DEADLINE("cpp", "inline", 3600ull * 1000000000ull);

    int n = 0;
    for (int i = 0; i < 6000 && (n = index_lines(argv[1])) < 2; i++) sleep_ms(10);
    std::printf("index lines: %d\n", n);
    return 0;
}
