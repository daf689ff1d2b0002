/* The subcommands of `docmine`, one file each (apps/cmd_<name>.c). Reference: none. */
#ifndef DM_COMMANDS_H
#define DM_COMMANDS_H

#include "apps/app.h"

dm_cmd_fn dm_cmd_info;
dm_cmd_fn dm_cmd_synth;
dm_cmd_fn dm_cmd_tune;
dm_cmd_fn dm_cmd_streamclust;
dm_cmd_fn dm_cmd_stem;
dm_cmd_fn dm_cmd_preprocess;
dm_cmd_fn dm_cmd_vectorize, dm_cmd_icf_build;
dm_cmd_fn dm_cmd_flock;
dm_cmd_fn dm_cmd_pipeline;

#endif
