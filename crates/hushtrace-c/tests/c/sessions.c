/* Session handles (issue 18, point 6; issue 20, point 5). Prints one line per check; exits 1
 * if any check fails.
 *   sessions prepare <dir>          starts and stops a session in <dir> (another process's trace)
 *   sessions check <old> <fresh>    <old> holds the trace of `prepare`, <fresh> is empty */
#include <hushtrace.h>
#include <stdio.h>
#include <string.h>

static int failed;

static void check(const char *what, int ok) {
    printf("%s %s: %s\n", ok ? "ok" : "FAIL", what, ht_last_error());
    if (!ok) failed = 1;
}

static int error_says(const char *what) { return strstr(ht_last_error(), what) != NULL; }

int main(int argc, char **argv) {
    ht_session *s;
    ht_stats st;
    if (argc == 3 && strcmp(argv[1], "prepare") == 0) {
        s = ht_session_start(argv[2]);
        if (s == NULL) return 1;
        HT_EVENT("sessions", "prepare");
        return ht_session_stop(s, NULL) == 0 ? 0 : 1;
    }
    if (argc != 4 || strcmp(argv[1], "check") != 0) return 2;

    s = ht_session_start(argv[3]);
    check("start", s != NULL);
    if (s == NULL) return 1;
    HT_EVENT("sessions", "one");
    check("stop", ht_session_stop(s, &st) == 0 && st.events_written == 1);
    check("second stop", ht_session_stop(s, &st) == HT_ERR_INVALID && error_says("stopped already"));
    check("third stop", ht_session_stop(s, NULL) == HT_ERR_INVALID && error_says("stopped already"));
    check("stop a pointer that is not a session",
          ht_session_stop((ht_session *)&st, NULL) == HT_ERR_INVALID &&
              error_says("not a session handle"));
    /* This process wrote to <fresh> before: a new session there is accepted. */
    s = ht_session_start(argv[3]);
    check("restart in the same directory", s != NULL);
    if (s != NULL) check("stop the restarted session", ht_session_stop(s, NULL) == 0);

    check("start in a directory holding another process's trace",
          ht_session_start(argv[2]) == NULL && error_says("already holds a trace") &&
              error_says("ht_session_append"));
    s = ht_session_append(argv[2]);
    check("append to it", s != NULL);
    if (s != NULL) {
        HT_EVENT("sessions", "appended");
        check("stop the appended session", ht_session_stop(s, NULL) == 0);
        check("stop it again", ht_session_stop(s, NULL) == HT_ERR_INVALID);
    }
    return failed;
}
