// Keys registered for databases SQLite opens later (VACUUM INTO targets).

#include "Internal.h"

typedef struct PendingKey {
    struct PendingKey *next;
    char *path;
    Codec *codec;               // NULL: explicitly plain
} PendingKey;

static pthread_mutex_t pendingMutex = PTHREAD_MUTEX_INITIALIZER;
static PendingKey *pendingHead = NULL;

int grdbcipher_set_pending_key(const char *path, const void *key, int nKey, int version, int kdfIterations) {
    PendingKey *pending = calloc(1, sizeof(PendingKey));
    if (!pending) return SQLITE_NOMEM;
    pending->path = strdup(path);
    if (key) {
        pending->codec = codec_new(key, nKey, version, kdfIterations);
        if (!pending->codec) { free(pending->path); free(pending); return SQLITE_MISUSE; }
    }
    pthread_mutex_lock(&pendingMutex);
    pending->next = pendingHead;
    pendingHead = pending;
    pthread_mutex_unlock(&pendingMutex);
    return SQLITE_OK;
}

/// Takes the pending key of `path`, if any: 1 and the codec (maybe NULL).
HIDDEN int take_pending_key(const char *path, Codec **codec) {
    int found = 0;
    pthread_mutex_lock(&pendingMutex);
    for (PendingKey **link = &pendingHead; *link; link = &(*link)->next) {
        if (strcmp((*link)->path, path) == 0) {
            PendingKey *pending = *link;
            *link = pending->next;
            *codec = pending->codec;
            free(pending->path);
            free(pending);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&pendingMutex);
    return found;
}
