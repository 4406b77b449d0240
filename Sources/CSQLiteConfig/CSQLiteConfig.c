#include <sqlite3.h>

#include "CSQLiteConfig.h"

int grdbregistry_set_no_checkpoint_on_close(void *connection, int on) {
    int now = -1;
    int rc = sqlite3_db_config((sqlite3 *)connection, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on, &now);
    if (rc == SQLITE_OK && now != on) return SQLITE_ERROR;
    return rc;
}
