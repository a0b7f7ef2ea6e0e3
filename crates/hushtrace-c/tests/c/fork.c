/* fork(): the child reports its own identity and never duplicates the parent's buffered
 * events. Usage: fork <dir> <before> <after> */
#include <hushtrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    ht_session *s;
    ht_stats st;
    long before, after, i;
    pid_t child;
    int status = 0;
    if (argc != 4) return 2;
    before = atol(argv[2]);
    after = atol(argv[3]);
    s = ht_session_start(argv[1]);
    if (s == NULL) {
        fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    /* Buffered, not yet written, when the process forks. */
    for (i = 0; i < before; i++) HT_EVENT("f", "before", HT_I64("i", i));
    child = fork();
    if (child == 0) {
        ht_set_thread_name("c-child");
        for (i = 0; i < after; i++) HT_EVENT("f", "child", HT_I64("i", i), HT_I64("pid", getpid()));
        exit(0); /* the child's session stops at exit */
    }
    for (i = 0; i < after; i++) HT_EVENT("f", "parent", HT_I64("i", i));
    waitpid(child, &status, 0);
    if (ht_session_stop(s, &st) != 0) {
        fprintf(stderr, "%s\n", ht_last_error());
        return 1;
    }
    printf("parent %d child %d status %d written %llu\n", (int)getpid(), (int)child, status,
           (unsigned long long)st.events_written);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
