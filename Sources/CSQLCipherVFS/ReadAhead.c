// Read-ahead: worker threads decrypt the pages a sequential scan reads next.

#include "Internal.h"

// A sequential scan of an encrypted database spends more time checking
// HMACs (SHA-512 for v4: about 1.5x what SQLite spends on a page) than
// anything else. Once a connection reads several consecutive pages, worker
// threads read, check and decrypt the pages that follow while SQLite works
// on the current one. The connection takes a prefetched page only if the
// page's IV and HMAC on disk are still those of the bytes that were checked
// (read_ahead_take); otherwise it reads and decrypts the page itself, with
// the same errors as without read-ahead. Workers never hold up a reader: a
// page still being worked on is decrypted again by the reader. Plaintext in
// the window is wiped when the connection closes or changes its key.

#define READAHEAD_WINDOW 32              // pages decrypted ahead of a reader
#define READAHEAD_TRIGGER 4              // consecutive pages before it starts
#define READAHEAD_QUEUE 4096             // jobs waiting for all connections

enum SlotState { SLOT_EMPTY, SLOT_QUEUED, SLOT_RUNNING, SLOT_READY };

typedef struct ReadAheadSlot {
    unsigned int pgno;
    int state;
    unsigned char *ciphertext;
    unsigned char *plaintext;
} ReadAheadSlot;

typedef struct ReadAhead {
    pthread_mutex_t mutex;               // guards slot states and page numbers
    pthread_cond_t changed;              // a slot left SLOT_RUNNING
    CipherFile *file;
    Codec *codec;                        // the file's, derived, unchanged while this exists
    int pageSize;
    unsigned int scheduledThrough;       // last page put in the window
    sqlite3_int64 pageCount;             // file size when last checked, in pages
    ReadAheadSlot slots[READAHEAD_WINDOW];
    unsigned char *memory;
} ReadAhead;

typedef struct ReadAheadJob { ReadAhead *readAhead; int slot; } ReadAheadJob;

// One stack of jobs for every connection, served by a few detached threads
// started on first use. Workers take the newest job, the page furthest
// ahead of its reader: a reader that catches up decrypts the near pages
// itself instead of waiting, and finds the far ones ready when it gets
// there. Lock order: queueMutex, then a ReadAhead's mutex.
static pthread_mutex_t queueMutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queueNotEmpty = PTHREAD_COND_INITIALIZER;
static ReadAheadJob queue[READAHEAD_QUEUE];
static unsigned long queueHead = 0, queueTail = 0;
static int readAheadEnabled = 1;
static int workerCount = 0;

/// A worker's AES context, keyed with the key of the last job.
typedef struct WorkerCipher {
    EVP_CIPHER_CTX *decryptor;
    unsigned char key[KEY_SIZE];
    int keyed;
} WorkerCipher;

static int prefetch(ReadAhead *readAhead, ReadAheadSlot *slot, unsigned int pgno, WorkerCipher *cipher) {
    sqlite3_file *real = readAhead->file->real;
    int pageSize = readAhead->pageSize;
    // pread(2) on the connection's descriptor: the unix VFS keeps no
    // per-read state on success, and the connection never closes the file
    // while a job runs (read_ahead_free waits).
    if (real->pMethods->xRead(real, slot->ciphertext, pageSize, (sqlite3_int64)(pgno - 1) * pageSize) != SQLITE_OK) return 0;
    if (!cipher->keyed || CRYPTO_memcmp(cipher->key, readAhead->codec->key, KEY_SIZE) != 0) {
        cipher->keyed = EVP_DecryptInit_ex(cipher->decryptor, EVP_aes_256_cbc(), NULL, readAhead->codec->key, NULL)
            && EVP_CIPHER_CTX_set_padding(cipher->decryptor, 0);
        if (!cipher->keyed) return 0;
        memcpy(cipher->key, readAhead->codec->key, KEY_SIZE);
    }
    return page_decrypt(readAhead->codec, cipher->decryptor, pgno, slot->ciphertext, slot->plaintext) == SQLITE_OK;
}

/// Forgets the key: the context's key schedule and the copy of the key.
static void worker_cipher_wipe(WorkerCipher *cipher) {
    if (cipher->decryptor) EVP_CIPHER_CTX_reset(cipher->decryptor);
    OPENSSL_cleanse(cipher->key, KEY_SIZE);
    cipher->keyed = 0;
}

static void *read_ahead_worker(void *unused) {
    WorkerCipher cipher = { EVP_CIPHER_CTX_new(), { 0 }, 0 };
    for (;;) {
        pthread_mutex_lock(&queueMutex);
        while (queueHead == queueTail) {
            if (cipher.keyed) {
                // Out of work: no key outlives the jobs that needed it (its
                // connection may close while this thread sleeps).
                pthread_mutex_unlock(&queueMutex);
                worker_cipher_wipe(&cipher);
                pthread_mutex_lock(&queueMutex);
                continue;
            }
            pthread_cond_wait(&queueNotEmpty, &queueMutex);
        }
        queueTail--;
        ReadAheadJob job = queue[queueTail % READAHEAD_QUEUE];
        ReadAhead *readAhead = job.readAhead;
        if (!readAhead) { pthread_mutex_unlock(&queueMutex); continue; }
        pthread_mutex_lock(&readAhead->mutex);
        ReadAheadSlot *slot = &readAhead->slots[job.slot];
        int run = slot->state == SLOT_QUEUED;
        unsigned int pgno = slot->pgno;
        if (run) slot->state = SLOT_RUNNING;
        pthread_mutex_unlock(&readAhead->mutex);
        pthread_mutex_unlock(&queueMutex);
        if (!run) continue;
        // The slot's buffers belong to this thread while it is running.
        int ok = cipher.decryptor && prefetch(readAhead, slot, pgno, &cipher);
        pthread_mutex_lock(&readAhead->mutex);
        slot->state = ok ? SLOT_READY : SLOT_EMPTY;
        pthread_cond_broadcast(&readAhead->changed);
        pthread_mutex_unlock(&readAhead->mutex);
    }
    return NULL;
}

static pthread_once_t workersOnce = PTHREAD_ONCE_INIT;

static void start_workers(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int count = cpus > 1 ? (int)(cpus - 1) : 1;
    if (count > 4) count = 4;
    for (int i = 0; i < count; i++) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attributes, read_ahead_worker, NULL) == 0) workerCount++;
        pthread_attr_destroy(&attributes);
    }
}

void grdbcipher_set_read_ahead(int enabled) {
    __atomic_store_n(&readAheadEnabled, enabled, __ATOMIC_RELAXED);
}

static ReadAhead *read_ahead_new(CipherFile *file) {
    pthread_once(&workersOnce, start_workers);
    if (workerCount == 0) return NULL;
    ReadAhead *readAhead = calloc(1, sizeof(ReadAhead));
    if (!readAhead) return NULL;
    int pageSize = file->codec->pageSize;
    readAhead->memory = malloc((size_t)pageSize * 2 * READAHEAD_WINDOW);
    if (!readAhead->memory) { free(readAhead); return NULL; }
    pthread_mutex_init(&readAhead->mutex, NULL);
    pthread_cond_init(&readAhead->changed, NULL);
    readAhead->file = file;
    readAhead->codec = file->codec;
    readAhead->pageSize = pageSize;
    for (int i = 0; i < READAHEAD_WINDOW; i++) {
        readAhead->slots[i].ciphertext = readAhead->memory + (size_t)pageSize * 2 * i;
        readAhead->slots[i].plaintext = readAhead->slots[i].ciphertext + pageSize;
    }
    return readAhead;
}

/// Cancels the queued jobs of a file, waits for the running ones, and frees
/// the window, wiping its plaintext.
HIDDEN void read_ahead_free(CipherFile *file) {
    ReadAhead *readAhead = file->readAhead;
    if (!readAhead) return;
    file->readAhead = NULL;
    pthread_mutex_lock(&queueMutex);
    for (unsigned long index = queueHead; index != queueTail; index++) {
        if (queue[index % READAHEAD_QUEUE].readAhead == readAhead) queue[index % READAHEAD_QUEUE].readAhead = NULL;
    }
    pthread_mutex_unlock(&queueMutex);
    pthread_mutex_lock(&readAhead->mutex);
    for (;;) {
        int running = 0;
        for (int i = 0; i < READAHEAD_WINDOW; i++) if (readAhead->slots[i].state == SLOT_RUNNING) running = 1;
        if (!running) break;
        pthread_cond_wait(&readAhead->changed, &readAhead->mutex);
    }
    pthread_mutex_unlock(&readAhead->mutex);
    pthread_mutex_destroy(&readAhead->mutex);
    pthread_cond_destroy(&readAhead->changed);
    OPENSSL_cleanse(readAhead->memory, (size_t)readAhead->pageSize * 2 * READAHEAD_WINDOW);
    free(readAhead->memory);
    free(readAhead);
}

/// Takes page `pgno` from the window into `page`: 1 when it was decrypted
/// ahead and is still what the file holds, 0 otherwise.
///
/// "Still what the file holds" is checked on the page's IV and HMAC: every
/// write of a page draws a fresh random IV, so a page rewritten since it was
/// decrypted (by a checkpoint, or another process) has another IV. Reading
/// those bytes instead of the whole page leaves the reader's core the HMAC
/// and the copy only. SQLite never reads a page while it is being written
/// (its locks see to that), so a page can't be half new, half old.
HIDDEN int read_ahead_take(CipherFile *file, unsigned int pgno, unsigned char *page) {
    ReadAhead *readAhead = file->readAhead;
    ReadAheadSlot *slot = &readAhead->slots[pgno % READAHEAD_WINDOW];
    int ready = 0;
    pthread_mutex_lock(&readAhead->mutex);
    // A page a worker is still on is decrypted again here rather than
    // waited for: on a busy machine the worker may not run for a while.
    if (slot->pgno == pgno && slot->state != SLOT_RUNNING) {
        ready = slot->state == SLOT_READY;
        // Taken, or still queued (the connection decrypts it now). Workers
        // never touch an empty slot, and only this thread fills slots: its
        // buffers stay as they are after the unlock.
        slot->state = SLOT_EMPTY;
    }
    pthread_mutex_unlock(&readAhead->mutex);
    if (!ready) return 0;
    int pageSize = readAhead->pageSize, reserve = readAhead->codec->reserve;
    unsigned char tag[MAX_RESERVE];
    sqlite3_int64 offset = (sqlite3_int64)(pgno - 1) * pageSize + pageSize - reserve;
    if (file->real->pMethods->xRead(file->real, tag, reserve, offset) != SQLITE_OK) return 0;
    if (memcmp(tag, slot->ciphertext + pageSize - reserve, reserve) != 0) return 0;
    memcpy(page, slot->plaintext, pageSize);
    file->readAheadPages++;
    return 1;
}

/// Records a page read by the connection, and once reads are sequential,
/// queues the pages that follow it.
HIDDEN void read_ahead_note(CipherFile *file, unsigned int pgno) {
    int sequential = pgno == file->lastReadPgno + 1;
    file->lastReadPgno = pgno;
    file->sequentialReads = sequential ? file->sequentialReads + 1 : 0;
    if (file->sequentialReads < READAHEAD_TRIGGER || file->rekeyCodec || !__atomic_load_n(&readAheadEnabled, __ATOMIC_RELAXED)) return;
    // v4 only: a v3 page (1 KB, HMAC-SHA1, about 1.5 µs) costs less to
    // decrypt than to take from a worker (lock, tag check, copy). Measured:
    // a v3 scan took 122 ms alone, 146-157 ms with read-ahead.
    if (file->codec->version != 4) return;
    if (!file->readAhead && !(file->readAhead = read_ahead_new(file))) return;
    ReadAhead *readAhead = file->readAhead;
    unsigned int through = pgno + READAHEAD_WINDOW - 1;
    unsigned int from = readAhead->scheduledThrough >= pgno + 1 && readAhead->scheduledThrough < through
        ? readAhead->scheduledThrough + 1 : pgno + 1;
    if (readAhead->scheduledThrough >= through && readAhead->scheduledThrough < pgno + READAHEAD_WINDOW * 2) return;
    if (through > readAhead->pageCount) {
        sqlite3_int64 size = 0;
        if (file->real->pMethods->xFileSize(file->real, &size) != SQLITE_OK) return;
        readAhead->pageCount = size / readAhead->pageSize;
        if (through > readAhead->pageCount) through = (unsigned int)readAhead->pageCount;
    }
    int queued[READAHEAD_WINDOW], count = 0;
    pthread_mutex_lock(&readAhead->mutex);
    for (unsigned int next = from; next <= through; next++) {
        int index = next % READAHEAD_WINDOW;
        ReadAheadSlot *slot = &readAhead->slots[index];
        if (slot->state == SLOT_RUNNING) continue;
        if (slot->state != SLOT_EMPTY && slot->pgno == next) continue;
        // Empty, or holding a page the connection went past.
        slot->pgno = next;
        slot->state = SLOT_QUEUED;
        queued[count++] = index;
    }
    pthread_mutex_unlock(&readAhead->mutex);
    readAhead->scheduledThrough = through;
    if (count == 0) return;
    pthread_mutex_lock(&queueMutex);
    for (int i = 0; i < count && queueTail - queueHead < READAHEAD_QUEUE; i++) {
        queue[queueTail % READAHEAD_QUEUE] = (ReadAheadJob){ readAhead, queued[i] };
        queueTail++;
    }
    pthread_cond_signal(&queueNotEmpty);
    pthread_mutex_unlock(&queueMutex);
}
