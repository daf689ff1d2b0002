/* The subcommands of `docmine`, one file each (apps/cmd_<name>.c). Reference: none. */
#ifndef DM_COMMANDS_H
#define DM_COMMANDS_H

#include "apps/app.h"

dm_cmd_fn dm_cmd_info;
dm_cmd_fn dm_cmd_synth;
dm_cmd_fn dm_cmd_flock;

#endif
