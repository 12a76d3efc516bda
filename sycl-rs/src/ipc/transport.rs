//! A rank channel: a Unix `SOCK_SEQPACKET` connection that carries IPC handles together with
//! their file descriptors (`SCM_RIGHTS`), plus plain messages. Opening a handle received this
//! way needs no ptrace permission over the exporter.
//!
//! ```
//! use sycl::ipc::transport::Channel;
//! let (a, b) = Channel::pair().unwrap();
//! a.send(b"ready").unwrap();
//! assert_eq!(b.recv().unwrap(), b"ready");
//! ```
#![allow(unsafe_code)]

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use sycl_backend::ipc::MAX_FDS;

use super::handle::HEADER_LEN;
use super::Handle;
use crate::{Errc, Error, Result};

const TAG_HANDLE: u8 = 1;
const TAG_MESSAGE: u8 = 2;
/// Largest message body.
pub const MAX_MESSAGE: usize = 64 * 1024;

fn os_err(what: &str, e: rustix::io::Errno) -> Error {
    if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::WOULDBLOCK {
        return Error::new(Errc::Runtime, format!("{what}: timed out"));
    }
    Error::new(Errc::Runtime, format!("{what}: {e}"))
}

/// A listening endpoint with an abstract-namespace name (no file to clean up).
pub struct Listener {
    fd: OwnedFd,
    name: String,
}

impl Listener {
    /// Listens on `name` (abstract namespace).
    pub fn bind(name: &str) -> Result<Listener> {
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| os_err("socket", e))?;
        let addr = SocketAddrUnix::new_abstract_name(name.as_bytes())
            .map_err(|e| os_err("socket name", e))?;
        rustix::net::bind(&fd, &addr).map_err(|e| os_err(&format!("bind `{name}`"), e))?;
        rustix::net::listen(&fd, 128).map_err(|e| os_err("listen", e))?;
        Ok(Listener {
            fd,
            name: name.to_string(),
        })
    }

    /// Listens on a fresh name made of this process's pid and a counter.
    pub fn bind_unique() -> Result<Listener> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let me = sycl_backend::ipc::ExporterId::current();
        let name = format!(
            "sycl-rs-{}-{:x}-{}",
            me.pid,
            me.nonce,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Listener::bind(&name)
    }

    /// The name to pass to [`Channel::connect`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for the next connection, at most `timeout` (`None`: forever).
    pub fn accept(&self, timeout: Option<Duration>) -> Result<Channel> {
        if let Some(t) = timeout {
            let mut fds = [rustix::event::PollFd::new(
                &self.fd,
                rustix::event::PollFlags::IN,
            )];
            let ts = rustix::event::Timespec::try_from(t)
                .map_err(|_| Error::invalid("timeout too large"))?;
            let n = rustix::event::poll(&mut fds, Some(&ts)).map_err(|e| os_err("poll", e))?;
            if n == 0 {
                return Err(Error::new(
                    Errc::Runtime,
                    format!("no rank connected to `{}` within {t:?}", self.name),
                ));
            }
        }
        let fd = rustix::net::accept_with(&self.fd, SocketFlags::CLOEXEC)
            .map_err(|e| os_err("accept", e))?;
        Ok(Channel { fd })
    }
}

/// One end of a rank channel.
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// Connects to a [`Listener`] by name.
    pub fn connect(name: &str) -> Result<Channel> {
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| os_err("socket", e))?;
        let addr = SocketAddrUnix::new_abstract_name(name.as_bytes())
            .map_err(|e| os_err("socket name", e))?;
        rustix::net::connect(&fd, &addr).map_err(|e| os_err(&format!("connect to `{name}`"), e))?;
        Ok(Channel { fd })
    }

    /// Two connected ends (e.g. one kept, one inherited by a child through
    /// [`Channel::into_raw_fd_inheritable`]).
    pub fn pair() -> Result<(Channel, Channel)> {
        let (a, b) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| os_err("socketpair", e))?;
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    /// Sets how long `recv`/`recv_handle` wait (`None`: forever).
    pub fn set_recv_timeout(&self, timeout: Option<Duration>) -> Result<()> {
        rustix::net::sockopt::set_socket_timeout(
            &self.fd,
            rustix::net::sockopt::Timeout::Recv,
            timeout,
        )
        .map_err(|e| os_err("SO_RCVTIMEO", e))
    }

    fn send_tagged(&self, tag: u8, body: &[u8], fds: &[BorrowedFd<'_>]) -> Result<()> {
        if body.len() > MAX_MESSAGE {
            return Err(Error::invalid(format!(
                "message of {} bytes exceeds {MAX_MESSAGE}",
                body.len()
            )));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(Error::new(
                Errc::Runtime,
                "too many descriptors for one message",
            ));
        }
        let tag = [tag];
        let iov = [IoSlice::new(&tag), IoSlice::new(body)];
        rustix::net::sendmsg(&self.fd, &iov, &mut control, SendFlags::NOSIGNAL)
            .map_err(|e| os_err("sendmsg", e))?;
        Ok(())
    }

    fn recv_tagged(&self) -> Result<(u8, Vec<u8>, Vec<OwnedFd>)> {
        let mut tag = [0u8; 1];
        let mut body = vec![0u8; MAX_MESSAGE];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = {
            let mut iov = [IoSliceMut::new(&mut tag), IoSliceMut::new(&mut body)];
            rustix::net::recvmsg(&self.fd, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)
                .map_err(|e| os_err("recvmsg", e))?
        };
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                fds.extend(received);
            }
        }
        if got.bytes == 0 {
            return Err(Error::new(Errc::Runtime, "the peer closed the channel"));
        }
        if got.flags.contains(rustix::net::ReturnFlags::TRUNC)
            || got.flags.contains(rustix::net::ReturnFlags::CTRUNC)
        {
            return Err(Error::invalid(
                "a message or its descriptors were truncated",
            ));
        }
        body.truncate(got.bytes - 1);
        Ok((tag[0], body, fds))
    }

    /// Sends a message.
    pub fn send(&self, message: &[u8]) -> Result<()> {
        self.send_tagged(TAG_MESSAGE, message, &[])
    }

    /// Receives a message; `Errc::Invalid` if a handle arrives instead.
    pub fn recv(&self) -> Result<Vec<u8>> {
        match self.recv_tagged()? {
            (TAG_MESSAGE, body, _) => Ok(body),
            (tag, ..) => Err(Error::invalid(format!(
                "expected a message, got item of tag {tag}"
            ))),
        }
    }

    /// Sends `handle` with its descriptors.
    pub fn send_handle(&self, handle: &Handle) -> Result<()> {
        let raw: Vec<RawFd> = handle.raw_fds_for_sending()?;
        // SAFETY: the numbers are only borrowed for this sendmsg. Either the handle owns the
        // descriptors, or this process exported it and its backend keeps them open until `put`.
        // After a `put` the number may be closed (sendmsg fails with EBADF) or reused by another
        // file, which the importer's `open` rejects by checking the file's identity.
        let borrowed: Vec<BorrowedFd<'_>> = raw
            .iter()
            .map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) })
            .collect();
        self.send_tagged(TAG_HANDLE, handle.as_bytes(), &borrowed)
    }

    /// Receives a handle with its descriptors.
    pub fn recv_handle(&self) -> Result<Handle> {
        match self.recv_tagged()? {
            (TAG_HANDLE, body, fds) => {
                if body.len() < HEADER_LEN {
                    return Err(Error::invalid("received handle is too short"));
                }
                Handle::from_bytes(body)?.with_fds(fds)
            }
            (tag, ..) => Err(Error::invalid(format!(
                "expected a handle, got item of tag {tag}"
            ))),
        }
    }

    /// Gives up the descriptor, without close-on-exec, for a child process to inherit; the child
    /// rebuilds the channel with [`Channel::from_inherited_fd`].
    pub fn into_raw_fd_inheritable(self) -> Result<RawFd> {
        rustix::io::fcntl_setfd(&self.fd, rustix::io::FdFlags::empty())
            .map_err(|e| os_err("fcntl", e))?;
        Ok(std::os::fd::IntoRawFd::into_raw_fd(self.fd))
    }

    /// Adopts an inherited descriptor (see [`Channel::into_raw_fd_inheritable`]); checks that it
    /// is a Unix seqpacket socket.
    pub fn from_inherited_fd(fd: RawFd) -> Result<Channel> {
        if fd < 0 {
            return Err(Error::invalid("negative descriptor"));
        }
        // SAFETY: the caller names a descriptor it inherited and nothing else owns; a number
        // that is not open fails the checks below without being closed twice, since we forget
        // the OwnedFd on failure.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let ok = rustix::net::sockopt::socket_type(&owned)
            .map(|t| t == SocketType::SEQPACKET)
            .unwrap_or(false);
        if !ok {
            std::mem::forget(owned);
            return Err(Error::invalid(format!(
                "descriptor {fd} is not a rank channel"
            )));
        }
        let _ = rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC);
        Ok(Channel { fd: owned })
    }

    /// The raw descriptor (for polling).
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
