/* header.c compiled as C++ (C++11 and C++17): the same calls, and the HT_SCOPE block that only
 * C++ has. One copy of the calls, so that the C and C++ checks cannot drift apart. */
#include "header.c"
