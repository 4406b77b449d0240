#ifndef CSQLITECONFIG_H
#define CSQLITECONFIG_H

/// Connection settings that SQLite sets through sqlite3_db_config, a
/// variadic function Swift can't call. Connections are `sqlite3 *` passed
/// as `void *` (as in CSQLiteSession: this header does not include
/// sqlite3.h, whose module GRDBSQLite owns).

/// Turns off (`on` = 1) or back on (0) the checkpoint SQLite runs when the
/// last connection to a WAL database closes (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE):
/// the WAL then stays, with its frames, for the next connection.
/// Returns SQLite's result code.
int grdbregistry_set_no_checkpoint_on_close(void *connection, int on);

#endif
