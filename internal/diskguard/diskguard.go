// Package diskguard wraps a Pebble file system to remember its first
// failed write.
//
// Pebble treats a failed write of its log or manifest as fatal: the
// commit that meets it panics, and one that meets it while holding
// Pebble's locks can end the process with a fatal error that no recover
// catches. Most such writes happen in the background (a full log block
// is written while later batches only fill memory), so the failure is
// known before the next commit: the stores (statestore, dedupe) ask Err
// before each commit and stop writing once it is set, and so return an
// error instead of reaching Pebble's panics.
package diskguard

import (
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// WriteError is the first write that failed: the operation, the file and
// the file system's error (a syscall.Errno such as ENOSPC, EROFS or EIO,
// for errors.Is).
type WriteError struct {
	Op   string // "create", "write", "sync", "rename", ...
	Path string
	Err  error
}

func (e *WriteError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// FS is a vfs.FS that records its first failed write. Reads and their
// errors pass through unrecorded: a failed read fails its caller only.
type FS struct {
	vfs.FS
	first atomic.Pointer[WriteError]
}

// Wrap returns fs, recording its first failed write.
func Wrap(fs vfs.FS) *FS { return &FS{FS: fs} }

// Err returns the first failed write, or nil.
func (fs *FS) Err() error {
	if e := fs.first.Load(); e != nil {
		return e
	}
	return nil
}

func (fs *FS) note(op, path string, err error) error {
	if err != nil {
		fs.first.CompareAndSwap(nil, &WriteError{Op: op, Path: path, Err: err})
	}
	return err
}

// Unwrap implements vfs.FS: fs wraps its file system.
func (fs *FS) Unwrap() vfs.FS { return fs.FS }

func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.file(f, name, fs.note("create", name, err))
}

func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.file(f, name, err)
}

func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.file(f, name, fs.note("open for writing", name, err))
}

// OpenDir: Pebble syncs directories after it creates or renames files.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.file(f, name, err)
}

func (fs *FS) Link(oldname, newname string) error {
	return fs.note("link", newname, fs.FS.Link(oldname, newname))
}

func (fs *FS) Rename(oldname, newname string) error {
	return fs.note("rename", newname, fs.FS.Rename(oldname, newname))
}

func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.file(f, newname, fs.note("reuse for writing", newname, err))
}

func (fs *FS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.note("mkdir", dir, fs.FS.MkdirAll(dir, perm))
}

func (fs *FS) file(f vfs.File, path string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs, path: path}, nil
}

// file records its failed writes and syncs in its FS.
type file struct {
	vfs.File
	fs   *FS
	path string
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.fs.note("write", f.path, err)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.note("write", f.path, err)
}

func (f *file) Preallocate(off, n int64) error {
	return f.fs.note("preallocate", f.path, f.File.Preallocate(off, n))
}

func (f *file) Sync() error { return f.fs.note("sync", f.path, f.File.Sync()) }

func (f *file) SyncData() error { return f.fs.note("sync", f.path, f.File.SyncData()) }

func (f *file) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.fs.note("sync", f.path, err)
}
