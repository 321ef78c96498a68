//! Socket options that neither the standard library, tokio nor socket2 set: today
//! `SO_RCVLOWAT`, the read wake threshold (a read is not woken before that many bytes
//! are there, or the peer closes, or an error). One FFI call, used by both backends;
//! DESIGN.md keeps `unsafe` to `src/buf/` and the io_uring backend, and this is one of
//! two exceptions (the other: the producer clock's counter read): a setsockopt with a
//! pointer to a local integer, valid for the call.
//! Elsewhere than Unix the threshold is not set (a hint only: reads wake as before).

use std::io;

/// Sets `SO_RCVLOWAT` on `socket` to `bytes` (at least 1; Linux caps it at half the
/// largest receive buffer).
#[cfg(unix)]
#[allow(unsafe_code)]
pub fn set_recv_lowat(socket: &impl std::os::fd::AsRawFd, bytes: usize) -> io::Result<()> {
    let value = bytes.clamp(1, i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from `&value`, a live local
    // c_int, for the duration of the call, on a descriptor the caller keeps open;
    // nothing is retained after it returns.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Not set off Unix (see the module docs).
#[cfg(not(unix))]
pub fn set_recv_lowat<S>(_socket: &S, _bytes: usize) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_threshold_is_set_on_a_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        super::set_recv_lowat(&stream, 4096).unwrap();
        assert_eq!(read_back(&stream), 4096);
        super::set_recv_lowat(&stream, 0).unwrap();
        assert_eq!(read_back(&stream), 1, "0 is raised to 1");
    }

    #[allow(unsafe_code)]
    fn read_back(stream: &std::net::TcpStream) -> libc::c_int {
        use std::os::fd::AsRawFd;
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `value`, a live local.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        value
    }
}
