// lakecache._native: the native data path's C library (src/native_client/lakecache_native.h,
// liblakecache_native.so) as Python objects. lakecache.native builds the file-like API on it.
//
// Client(path) attaches to the mount that holds path; File is one open file of it; a view is a
// read-only memoryview of the node's memory whose owner calls lc_release when the last memoryview
// of it goes; read_many gives writable memoryviews of the buffers the library allocated, freed
// with their owner.
//
// Lifetimes: a Client's session (lc_detach) ends when the Client, and every File and view of it,
// are gone, since detaching closes the files and releases the views still in use; Client.close()
// only stops new opens. Every call that can block runs without the GIL. A File's calls hold its
// lock shared and close() holds it exclusive, so no call uses an lc_file another thread closed.
// fork(): a child may go on reading with its parent's client and files (the library attaches anew
// in the child), but it never closes, releases or detaches what the parent made: that is the
// parent's to end, and a parent thread may have held the client's lock at the fork.
#include <pybind11/pybind11.h>

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "lakecache_native.h"

namespace py = pybind11;

namespace {

// ---- errors ------------------------------------------------------------------------------------

struct Failure {
  int error = 0;
  std::string message;
};

Failure failure_of(int error, const char* message) {
  Failure failure;
  failure.error = error > 0 ? error : EIO;
  failure.message = message != nullptr && *message != '\0' ? message : std::strerror(failure.error);
  return failure;
}

// errno and lc_last_error() of the call that just failed. The message is per thread: read it on
// the thread that made the call, before any other call of the library.
Failure last_failure() {
  int error = errno;
  return failure_of(error, lc_last_error());
}

// OSError(errno, message[, filename]): Python makes it the subclass of the errno
// (FileNotFoundError for ENOENT, ...).
py::object os_error(const Failure& failure, py::handle filename) {
  py::object text = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
      failure.message.data(), static_cast<Py_ssize_t>(failure.message.size()), "replace"));
  if (!text) throw py::error_already_set();
  py::tuple args =
      filename && !filename.is_none()
          ? py::make_tuple(failure.error, text, py::reinterpret_borrow<py::object>(filename))
          : py::make_tuple(failure.error, text);
  PyObject* error = PyObject_Call(PyExc_OSError, args.ptr(), nullptr);
  if (error == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(error);
}

[[noreturn]] void raise(const py::object& exception) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw py::error_already_set();
}

[[noreturn]] void raise_os_error(const Failure& failure, py::handle filename) {
  raise(os_error(failure, filename));
}

[[noreturn]] void raise_closed_file() { throw py::value_error("I/O operation on closed file"); }

// ---- paths and the GIL -------------------------------------------------------------------------

// A path argument (str, bytes or os.PathLike) as the bytes the kernel sees, like os.fsencode; a
// NUL in it is a ValueError.
std::string fs_bytes(py::handle path) {
  PyObject* bytes = nullptr;
  if (PyUnicode_FSConverter(path.ptr(), &bytes) == 0) throw py::error_already_set();
  py::object owner = py::reinterpret_steal<py::object>(bytes);
  return std::string(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
}

// os.fspath(path): what errors name.
py::object fspath(py::handle path) {
  PyObject* result = PyOS_FSPath(path.ptr());
  if (result == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Runs fn without the GIL when this thread holds it, as destructors do; at interpreter shutdown
// the GIL stays.
template <class Fn>
void without_gil(Fn&& fn) {
  if (Py_IsInitialized() != 0 && PyGILState_Check() != 0 && !interpreter_finalizing()) {
    py::gil_scoped_release nogil;
    fn();
  } else {
    fn();
  }
}

// A nonnegative int argument (an offset or a length) as uint64_t.
uint64_t nonnegative(long long value, const char* what) {
  if (value < 0) throw py::value_error(std::string(what) + " must not be negative");
  return static_cast<uint64_t>(value);
}

// A length argument: -1 (or None) is "to the end", other negative values are refused.
constexpr uint64_t kToEnd = std::numeric_limits<uint64_t>::max();
uint64_t length_argument(py::handle length) {
  if (length.is_none()) return kToEnd;
  long long value = length.cast<long long>();
  if (value == -1) return kToEnd;
  return nonnegative(value, "length (or -1 for the rest of the file)");
}

// ---- owners of memory that memoryviews expose --------------------------------------------------

// A byte every empty buffer points at: a memoryview of a null pointer surprises some consumers.
char empty_byte = 0;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Malloced = std::unique_ptr<char, FreeDeleter>;

// A malloc'd buffer, writable; freed with its owner.
class Buffer {
 public:
  Buffer(Malloced data, size_t size) : data_(std::move(data)), size_(size) {}
  py::buffer_info info() {
    void* data = size_ == 0 || !data_ ? static_cast<void*>(&empty_byte) : data_.get();
    return py::buffer_info(data, 1, "B", 1, {static_cast<py::ssize_t>(size_)}, {1}, false);
  }

 private:
  Malloced data_;
  size_t size_;
};

py::memoryview memoryview_of(Malloced data, size_t size) {
  return py::memoryview(py::cast(std::make_unique<Buffer>(std::move(data), size)));
}

// ---- the client --------------------------------------------------------------------------------

// One attachment. It lives as long as the Client or any File or view of it: lc_detach closes the
// files and releases the views.
struct ClientCore {
  ClientCore(lc_client* attached, std::string root)
      : client(attached), mountpoint(std::move(root)) {}
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;
  ~ClientCore() {
    if (pid == getpid()) without_gil([this] { lc_detach(client); });
  }

  lc_client* const client;
  const std::string mountpoint;
  const pid_t pid = getpid();  // the process that attached
};

// A read-only range of the node's memory (lc_view_range), released when the last memoryview of it
// goes. Views stay valid after their file is closed (only lc_release and lc_detach end them).
class View {
 public:
  View(std::shared_ptr<ClientCore> core, lc_view view) : core_(std::move(core)), view_(view) {}
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  ~View() {
    if (pid_ == getpid()) without_gil([this] { lc_release(core_->client, &view_); });
  }
  py::buffer_info info() {
    const void* data = view_.length == 0 || view_.data == nullptr ? &empty_byte : view_.data;
    return py::buffer_info(const_cast<void*>(data), 1, "B", 1,
                           {static_cast<py::ssize_t>(view_.length)}, {1}, true);
  }

 private:
  std::shared_ptr<ClientCore> core_;
  lc_view view_;
  const pid_t pid_ = getpid();
};

class File {
 public:
  File(std::shared_ptr<ClientCore> core, py::object client, lc_file* file, py::object name)
      : core_(std::move(core)),
        client_(std::move(client)),
        file_(file),
        size_(lc_size(file)),
        name_(std::move(name)) {}
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (file_ != nullptr && pid_ == getpid()) without_gil([this] { lc_close(file_); });
  }

  uint64_t size() const { return size_; }
  const py::object& name() const { return name_; }
  const py::object& client() const { return client_; }
  const std::shared_ptr<ClientCore>& core() const { return core_; }
  bool closed() const { return closed_.load(); }
  void check_open() const {
    if (closed_.load()) raise_closed_file();
  }
  // The bytes from offset to the end (0 past it), at most length.
  uint64_t left(uint64_t offset, uint64_t length) const {
    return offset >= size_ ? 0 : std::min(length, size_ - offset);
  }

  void close() {
    if (closed_.exchange(true)) return;
    py::gil_scoped_release nogil;
    std::unique_lock lock(mutex_);
    lc_file* file = std::exchange(file_, nullptr);
    if (file != nullptr && pid_ == getpid()) lc_close(file);
  }

  // Reads length bytes at offset into buf, in as many calls as it takes: fewer only at the end of
  // the file. Without the GIL.
  bool pread_full(char* buf, uint64_t length, uint64_t offset, uint64_t* done, Failure* failure) {
    std::shared_lock lock(mutex_);
    *done = 0;
    if (file_ == nullptr) {
      *failure = failure_of(EBADF, "the file was closed by another thread");
      return false;
    }
    while (*done < length) {
      ssize_t got = lc_pread(file_, buf + *done, length - *done, offset + *done);
      if (got < 0) {
        *failure = last_failure();
        return false;
      }
      if (got == 0) break;
      *done += static_cast<uint64_t>(got);
    }
    return true;
  }

  // pread_full into a new bytes object of at most length bytes, shorter at the end.
  py::bytes read_bytes(uint64_t length, uint64_t offset) {
    check_open();
    length = left(offset, length);
    PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(length));
    if (bytes == nullptr) throw py::error_already_set();
    py::object owner = py::reinterpret_steal<py::object>(bytes);
    uint64_t done = 0;
    Failure failure;
    bool ok;
    {
      py::gil_scoped_release nogil;
      ok = pread_full(PyBytes_AS_STRING(bytes), length, offset, &done, &failure);
    }
    if (!ok) raise_os_error(failure, name_);
    if (done < length) {
      PyObject* resized = owner.release().ptr();
      if (_PyBytes_Resize(&resized, static_cast<Py_ssize_t>(done)) != 0) {
        throw py::error_already_set();  // _PyBytes_Resize freed it
      }
      owner = py::reinterpret_steal<py::object>(resized);
    }
    return py::reinterpret_steal<py::bytes>(owner.release());
  }

  // pread_full into a writable buffer: the bytes read.
  uint64_t read_into(py::handle target, uint64_t offset) {
    check_open();
    Py_buffer buffer;
    if (PyObject_GetBuffer(target.ptr(), &buffer, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
      throw py::error_already_set();
    }
    std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> hold(&buffer, PyBuffer_Release);
    uint64_t length = left(offset, static_cast<uint64_t>(buffer.len));
    uint64_t done = 0;
    Failure failure;
    bool ok;
    {
      py::gil_scoped_release nogil;
      ok = pread_full(static_cast<char*>(buffer.buf), length, offset, &done, &failure);
    }
    if (!ok) raise_os_error(failure, name_);
    return done;
  }

  py::bytes read(long long n) {
    uint64_t offset = position_.load();
    py::bytes data = read_bytes(n < 0 ? kToEnd : static_cast<uint64_t>(n), offset);
    position_.store(offset + static_cast<uint64_t>(PyBytes_GET_SIZE(data.ptr())));
    return data;
  }

  uint64_t readinto(py::handle target) {
    uint64_t offset = position_.load();
    uint64_t done = read_into(target, offset);
    position_.store(offset + done);
    return done;
  }

  uint64_t seek(long long offset, int whence) {
    check_open();
    long long base;
    switch (whence) {
      case SEEK_SET:
        base = 0;
        break;
      case SEEK_CUR:
        base = static_cast<long long>(position_.load());
        break;
      case SEEK_END:
        base = static_cast<long long>(size_);
        break;
      default:
        throw py::value_error("whence must be 0 (SEEK_SET), 1 (SEEK_CUR) or 2 (SEEK_END)");
    }
    long long target;
    if (__builtin_add_overflow(base, offset, &target) || target < 0) {
      raise_os_error(failure_of(EINVAL, "seek before the start of the file"), name_);
    }
    position_.store(static_cast<uint64_t>(target));
    return static_cast<uint64_t>(target);
  }

  uint64_t tell() const {
    check_open();
    return position_.load();
  }

  // Up to length bytes at offset in place (fewer at the end of the file or of one of its blocks;
  // empty at the end) as a read-only memoryview.
  py::memoryview view(uint64_t offset, uint64_t length) {
    check_open();
    length = left(offset, length);
    lc_view view{};
    Failure failure;
    int result;
    {
      py::gil_scoped_release nogil;
      std::shared_lock lock(mutex_);
      if (file_ == nullptr) {
        result = -1;
        failure = failure_of(EBADF, "the file was closed by another thread");
      } else {
        result = lc_view_range(file_, offset, static_cast<size_t>(length), &view);
        if (result != 0) failure = last_failure();
      }
    }
    if (result != 0) {
      if (failure.error == ENOBUFS) {
        failure.message +=
            " (views still alive hold the session's budget of anchored memory: "
            "release some, e.g. `with view:` or memoryview.release())";
      }
      raise_os_error(failure, name_);
    }
    // The owner releases the view whatever happens from here on.
    auto owner = std::make_unique<View>(core_, view);
    return py::memoryview(py::cast(std::move(owner)));
  }

  // read_many: the lock a batch holds on each of its files, and the handle it reads.
  std::shared_mutex& mutex() { return mutex_; }
  lc_file* handle() const { return file_; }

 private:
  std::shared_ptr<ClientCore> core_;
  py::object client_;  // the Python Client, for lakecache.native to group batches by client
  lc_file* file_;      // null once closed; guarded by mutex_
  std::shared_mutex mutex_;
  std::atomic<bool> closed_{false};
  const uint64_t size_;  // of the version the file was opened on
  std::atomic<uint64_t> position_{0};
  py::object name_;
  const pid_t pid_ = getpid();
};

class Client {
 public:
  explicit Client(const py::object& path) {
    py::object name = fspath(path);
    std::string where = fs_bytes(path);
    lc_client* client;
    Failure failure;
    std::string mountpoint;
    {
      py::gil_scoped_release nogil;
      client = lc_attach(where.c_str());
      if (client == nullptr) {
        failure = last_failure();
      } else {
        const char* root = lc_mountpoint(client);
        mountpoint = root != nullptr ? root : "";
      }
    }
    if (client == nullptr) {
      failure.message = "cannot attach to the lakecache mount that holds it: " + failure.message;
      raise_os_error(failure, name);
    }
    core_ = std::make_shared<ClientCore>(client, std::move(mountpoint));
    PyObject* decoded = PyUnicode_DecodeFSDefaultAndSize(
        core_->mountpoint.data(), static_cast<Py_ssize_t>(core_->mountpoint.size()));
    if (decoded == nullptr) throw py::error_already_set();
    mountpoint_ = py::reinterpret_steal<py::object>(decoded);
  }

  const py::object& mountpoint() const { return mountpoint_; }
  bool closed() const { return !core_; }
  void close() { core_.reset(); }  // the session ends once its files and views are gone too

  std::shared_ptr<ClientCore> core() const {
    if (!core_) throw py::value_error("the lakecache client is closed");
    return core_;
  }

  static py::object open(const py::object& self, const py::object& path) {
    std::shared_ptr<ClientCore> core = self.cast<Client&>().core();
    py::object name = fspath(path);
    std::string where = fs_bytes(path);
    lc_file* file;
    Failure failure;
    {
      py::gil_scoped_release nogil;
      file = lc_open(core->client, where.c_str());
      if (file == nullptr) failure = last_failure();
    }
    if (file == nullptr) raise_os_error(failure, name);
    return owned_file(core, self, file, name);
  }

  static py::object open_fd(const py::object& self, const py::object& source) {
    std::shared_ptr<ClientCore> core = self.cast<Client&>().core();
    int fd = PyObject_AsFileDescriptor(source.ptr());
    if (fd < 0) throw py::error_already_set();
    py::object name =
        py::hasattr(source, "name") ? py::object(source.attr("name")) : py::object(py::int_(fd));
    lc_file* file;
    Failure failure;
    {
      py::gil_scoped_release nogil;
      file = lc_open_fd(core->client, fd);
      if (file == nullptr) failure = last_failure();
    }
    if (file == nullptr) raise_os_error(failure, name);
    return owned_file(core, self, file, name);
  }

  py::list read_many(const py::iterable& items, bool return_exceptions);

 private:
  static py::object owned_file(const std::shared_ptr<ClientCore>& core, const py::object& self,
                               lc_file* file, const py::object& name) {
    // The File owns the handle from here on: closed by its destructor whatever happens.
    return py::cast(std::make_unique<File>(core, self, file, name));
  }

  std::shared_ptr<ClientCore> core_;
  py::object mountpoint_;
};

// One read of a batch, as read_many parses it.
struct BatchItem {
  py::object target;  // the File or path, kept alive through the batch
  File* file = nullptr;
  std::string path;
  py::object name;  // what an error names
  uint64_t offset = 0;
  uint64_t length = 0;  // kToEnd: to the end of the file
  Malloced buffer;      // the library's malloc, ours to free
  int64_t result = 0;
  std::string error;
};

py::list Client::read_many(const py::iterable& items, bool return_exceptions) {
  std::shared_ptr<ClientCore> core = this->core();
  std::vector<BatchItem> batch;
  for (py::handle entry : items) {
    py::object fast = py::reinterpret_steal<py::object>(
        PySequence_Fast(entry.ptr(), "read_many: each item is (path or File, offset, length)"));
    if (!fast) throw py::error_already_set();
    if (PySequence_Fast_GET_SIZE(fast.ptr()) != 3) {
      throw py::type_error("read_many: each item is (path or File, offset, length)");
    }
    PyObject** fields = PySequence_Fast_ITEMS(fast.ptr());
    BatchItem& item = batch.emplace_back();
    item.target = py::reinterpret_borrow<py::object>(fields[0]);
    item.offset = nonnegative(py::handle(fields[1]).cast<long long>(), "offset");
    item.length = length_argument(fields[2]);
    if (py::isinstance<File>(item.target)) {
      item.file = &item.target.cast<File&>();
      if (item.file->core() != core) {
        throw py::value_error("read_many: a File of another Client (" +
                              std::string(py::str(item.file->name())) + ")");
      }
      item.file->check_open();
      item.name = item.file->name();
    } else {
      item.name = fspath(item.target);
      item.path = fs_bytes(item.target);
    }
  }
  if (batch.empty()) return py::list();

  Failure client_failure;
  ssize_t succeeded;
  {
    py::gil_scoped_release nogil;
    // Each file of the batch stays open until the batch is done: shared locks, one per file.
    std::vector<std::shared_mutex*> mutexes;
    for (BatchItem& item : batch) {
      if (item.file != nullptr) mutexes.push_back(&item.file->mutex());
    }
    std::sort(mutexes.begin(), mutexes.end());
    mutexes.erase(std::unique(mutexes.begin(), mutexes.end()), mutexes.end());
    std::vector<std::shared_lock<std::shared_mutex>> locks;
    locks.reserve(mutexes.size());
    for (std::shared_mutex* mutex : mutexes) locks.emplace_back(*mutex);

    std::vector<lc_read> reads;
    std::vector<BatchItem*> submitted;
    reads.reserve(batch.size());
    submitted.reserve(batch.size());
    for (BatchItem& item : batch) {
      lc_read read{};
      if (item.file != nullptr) {
        read.file = item.file->handle();
        if (read.file == nullptr) {  // closed by another thread since the check above
          item.result = -EBADF;
          item.error = "the file was closed by another thread";
          continue;
        }
      } else {
        read.path = item.path.c_str();
      }
      read.offset = item.offset;
      read.length = item.length;
      read.buf = nullptr;  // the library allocates what the read needs (no more than the file has)
      reads.push_back(read);
      submitted.push_back(&item);
    }
    succeeded = reads.empty() ? 0 : lc_read_many(core->client, reads.data(), reads.size());
    if (succeeded < 0) client_failure = last_failure();
    for (size_t i = 0; i < reads.size(); ++i) {
      BatchItem& item = *submitted[i];
      // The library's malloc, ours to free, whether the read succeeded or not.
      item.buffer.reset(static_cast<char*>(reads[i].buf));
      item.result = succeeded < 0 ? -client_failure.error : reads[i].result;
      // Owned by the client until its next call: copied now.
      if (item.result < 0 && reads[i].error != nullptr) item.error = reads[i].error;
    }
  }
  if (succeeded < 0) raise_os_error(client_failure, py::none());

  py::list results(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    BatchItem& item = batch[i];
    if (item.result < 0) {
      py::object error =
          os_error(failure_of(static_cast<int>(-item.result), item.error.c_str()), item.name);
      if (!return_exceptions) raise(error);  // every read is done; the buffers are freed
      results[i] = error;
      continue;
    }
    if (!item.buffer && item.result > 0) {
      throw std::runtime_error("lc_read_many: a read of bytes without a buffer");
    }
    results[i] = memoryview_of(std::move(item.buffer), static_cast<size_t>(item.result));
  }
  return results;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() =
      "The native data path's C library (liblakecache_native) for lakecache.native: Client, File "
      "and zero-copy views.";
  m.attr("VERSION") = LC_NATIVE_VERSION;

  py::class_<Buffer>(m, "_Buffer", py::buffer_protocol(),
                     "The memory of a read_many result; freed with the last memoryview of it.")
      .def_buffer(&Buffer::info);
  py::class_<View>(m, "_View", py::buffer_protocol(),
                   "A range of the node's memory; released with the last memoryview of it.")
      .def_buffer(&View::info);

  py::class_<Client>(m, "Client", R"(Client(path): attached to the lakecache mount that holds path.

Raises OSError (errno, lc_last_error()'s message) when it cannot attach. Paths given to open() and
read_many() are absolute, or relative to the mountpoint. Calls on one client are serialised by the
library; use one client per thread for parallel reads. close() (or leaving a with block) stops new
opens; the session ends once the client's files and views are gone too.)")
      .def(py::init<const py::object&>(), py::arg("path"))
      .def_property_readonly("mountpoint", &Client::mountpoint, "The mount's root.")
      .def_property_readonly("closed", &Client::closed)
      .def("open", &Client::open, py::arg("path"),
           "The file at path, for reading: a File. OSError (FileNotFoundError, ...) if not.")
      .def("open_fd", &Client::open_fd, py::arg("fd"),
           "The file that fd (or an object with fileno()), open for reading through the mount, "
           "refers to: a File. fd stays the caller's.")
      .def("read_many", &Client::read_many, py::arg("items"), py::arg("return_exceptions") = false,
           R"(Reads a batch in one call: items are (path or File, offset, length), length -1 for
the rest of the file. Returns one writable memoryview per item, in order, shorter at the end of the
file. A failed item raises its OSError (naming its path) once every read is done, or with
return_exceptions=True takes its place in the list.)")
      .def("close", &Client::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Client& self, py::args) { self.close(); })
      .def("__repr__", [](const Client& self) {
        return "<lakecache._native.Client mountpoint=" + std::string(py::repr(self.mountpoint())) +
               (self.closed() ? " closed>" : ">");
      });

  py::class_<File>(m, "File", R"(One open file of a Client (Client.open, Client.open_fd).

Reads see the version of the object the file was opened on: size is fixed. read, readinto, seek and
tell use the file's position; pread and preadinto do not. view() hands out bytes in place.)")
      .def_property_readonly("size", &File::size)
      .def_property_readonly("name", &File::name)
      .def_property_readonly("client", &File::client)
      .def_property_readonly("closed", &File::closed)
      .def("read", &File::read, py::arg("n") = -1,
           "Up to n bytes (all that is left with n < 0) from the position, as bytes.")
      .def("readall", [](File& self) { return self.read(-1); })
      .def("readinto", &File::readinto, py::arg("buffer"),
           "Fills a writable buffer from the position: the bytes read (fewer only at the end).")
      .def(
          "pread",
          [](File& self, long long n, long long offset) {
            return self.read_bytes(n < 0 ? kToEnd : static_cast<uint64_t>(n),
                                   nonnegative(offset, "offset"));
          },
          py::arg("n"), py::arg("offset"), "Up to n bytes at offset (n < 0: to the end).")
      .def(
          "preadinto",
          [](File& self, py::handle buffer, long long offset) {
            return self.read_into(buffer, nonnegative(offset, "offset"));
          },
          py::arg("buffer"), py::arg("offset"), "Fills a writable buffer from offset.")
      .def("seek", &File::seek, py::arg("offset"), py::arg("whence") = 0)
      .def("tell", &File::tell)
      .def(
          "view",
          [](File& self, long long offset, py::handle length) {
            return self.view(nonnegative(offset, "offset"), length_argument(length));
          },
          py::arg("offset") = 0, py::arg("length") = -1,
          R"(Up to length bytes at offset, in place: a read-only memoryview of the node's memory.
It may be shorter than asked (the end of one of the file's blocks: ask again from where it ends) and
is empty at the end of the file. The memory is released with the last memoryview of it (or its
release()): views count against the session's budget of anchored bytes, so do not hoard them.)")
      .def("readable",
           [](const File& self) {
             self.check_open();
             return true;
           })
      .def("seekable",
           [](const File& self) {
             self.check_open();
             return true;
           })
      .def("writable",
           [](const File& self) {
             self.check_open();
             return false;
           })
      .def("close", &File::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](File& self, py::args) { self.close(); })
      .def("__repr__", [](const File& self) {
        return "<lakecache._native.File name=" + std::string(py::repr(self.name())) +
               " size=" + std::to_string(self.size()) + (self.closed() ? " closed>" : ">");
      });
}
