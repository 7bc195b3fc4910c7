/*
 * plb_app.c - layout of struct plb_app_task as the C compiler sees it, for
 * the test that checks the Rust TaskArg against it (src/apps/exec.rs).
 *
 * License: LGPL-2.1-or-later.
 */
#include <stddef.h>
#include "plb_app.h"

size_t plb_app_task_layout(unsigned what)
{
	switch (what) {
	case 0: return offsetof(struct plb_app_task, compute_s);
	case 1: return offsetof(struct plb_app_task, worker);
	case 2: return offsetof(struct plb_app_task, offset);
	case 3: return offsetof(struct plb_app_task, len);
	case 4: return offsetof(struct plb_app_task, params);
	case 5: return sizeof(struct plb_app_task);
	default: return (size_t)-1;
	}
}
