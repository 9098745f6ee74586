/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The live screen of `tally top` (curses). The only file that calls curses:
 * it draws a frame (top_frame.h) and turns keys into changes of struct top_ui.
 */
#ifndef TALLY_TOP_VIEW_H
#define TALLY_TOP_VIEW_H

#include <stdbool.h>

#include "top_frame.h"

struct top_ui {
	struct top_order order;
	bool paused;	    /* the screen keeps its frame; collection goes on */
	bool threads;	    /* the thread table instead of the group table */
	enum top_mode mode; /* what the rows are */
	unsigned top;	    /* first table row shown (scrolling) */
};

enum top_view_event {
	TOP_VIEW_IDLE,	 /* no key */
	TOP_VIEW_REDRAW, /* a key changed the screen, or the terminal was resized */
	TOP_VIEW_RESORT, /* the order changed: sort the frame, then redraw */
	TOP_VIEW_REMODE, /* the rows are of another kind: build the frame again */
	TOP_VIEW_QUIT,
};

/*
 * Take the terminal (stdin, stdout): alternate screen, no echo, keys one at
 * a time. Colors unless no_color or the terminal has none. Restored by
 * top_view_close(), which is also registered with atexit(). 0, or -ENOTTY
 * when the terminal cannot be used (curses says nothing on the screen).
 */
int top_view_open(bool no_color);
/* Give the terminal back as it was; safe to call when not open, and twice. */
void top_view_close(void);
/* Draw a frame (its rows in the order to show) with the ui's state; the
 * scroll position is clamped to what there is to show. */
void top_view_draw(const struct top_frame *f, struct top_ui *ui);
/* Repaint the whole terminal at the next draw, not only what changed:
 * a started command shares the terminal and may have written over it. */
void top_view_repaint(void);
/* Read the keys waiting, waiting up to wait_ms for the first (0: none);
 * apply them to ui and say what the screen needs. */
enum top_view_event top_view_input(struct top_ui *ui, int wait_ms);

#endif /* TALLY_TOP_VIEW_H */
