// Nested HT_SCOPE (C++), in plain, inline, template and recursive functions, on two threads.
// Usage: scope <dir> <depth>
#include <hushtrace.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

inline void leaf(int d) { HT_SCOPE("cpp", "leaf", HT_I64("d", d)); }

template <typename T>
void tmpl(T v) {
    HT_SCOPE("cpp", "tmpl", HT_F64("v", static_cast<double>(v)));
    HT_COUNTER("cpp", "value", v);
    leaf(-1);
}

void recurse(int d) {
    HT_SCOPE("cpp", "recurse", HT_I64("depth", d), HT_STR("tag", std::to_string(d).c_str()));
    if (d > 0) {
        HT_SCOPE("cpp", "inner");
        HT_SCOPE("cpp", "inner2", HT_BOOL("even", d % 2 == 0));
        recurse(d - 1);
    } else {
        leaf(d);
    }
}

void never_called() { HT_SCOPE("cpp", "never"); }

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int depth = std::atoi(argv[2]);
    ht_session *s = ht_session_start(argv[1]);
    if (s == nullptr) {
        std::fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    auto work = [depth] {
        recurse(depth);
        tmpl(3);
        tmpl(2.5);
        tmpl(7u);
    };
    std::thread t(work);
    work();
    t.join();
    ht_stats st;
    if (ht_session_stop(s, &st) != 0) return 1;
    std::printf("written %llu\n", static_cast<unsigned long long>(st.events_written));
    return 0;
}
