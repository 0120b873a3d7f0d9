/*
 * check.h - the host tests' CHECK: counts every check and reports a failed one
 * without stopping. One translation unit per program, so the counters are its
 * own.
 */
#ifndef STIGMESH_TEST_CHECK_H
#define STIGMESH_TEST_CHECK_H

#include <stdio.h>

static long checks;
static long failures;

#define CHECK(cond)                                                        \
    do {                                                                   \
        checks++;                                                          \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                \
        }                                                                  \
    } while (0)

#endif
