//! A rank channel: a Unix `SOCK_SEQPACKET` connection that carries IPC handles together with
//! their file descriptors (`SCM_RIGHTS`), plus plain messages. Opening a handle received this
//! way needs no ptrace permission over the exporter.
//!
//! Both ends authenticate each other by the credentials the kernel records for the socket
//! (`SO_PEERCRED`): a listener accepts only peers whose user it allows ([`PeerPolicy`]: by
//! default its own user), and a connecting rank talks only to a listener of a user it allows.
//! Abstract socket names are visible to every user of the network namespace, so without this
//! any local user could connect and receive the descriptors (or bind the name first and
//! receive a rank's).
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
use std::time::{Duration, Instant};

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

/// The credentials of the process at the other end of a channel, as the kernel recorded
/// them when the connection was made (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Its process id (in this process's pid namespace; 0 if it has none there).
    pub pid: u32,
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
}

impl PeerCredentials {
    fn of(fd: &OwnedFd) -> Result<PeerCredentials> {
        // Not rustix's `socket_peercred`: it reads the pid into a non-zero `Pid`, and the kernel
        // answers 0 for a peer whose pid is not visible in our pid namespace.
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `fd` is an open socket we own; `cred` and `len` are valid for writes and
        // `len` is the size of `cred`, as SO_PEERCRED expects.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if r != 0 || len as usize != std::mem::size_of::<libc::ucred>() {
            return Err(Error::new(
                Errc::Runtime,
                format!("SO_PEERCRED: {}", std::io::Error::last_os_error()),
            ));
        }
        Ok(PeerCredentials {
            pid: cred.pid.max(0) as u32,
            uid: cred.uid,
            gid: cred.gid,
        })
    }
}

/// Which users a rank channel talks to, judged by [`PeerCredentials`]. The default is
/// [`PeerPolicy::same_user`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPolicy {
    uids: Vec<u32>,
}

impl PeerPolicy {
    /// Only processes running as this process's effective user.
    pub fn same_user() -> PeerPolicy {
        PeerPolicy {
            uids: vec![rustix::process::geteuid().as_raw()],
        }
    }

    /// Processes running as this process's effective user or as one of `uids`.
    pub fn users(uids: impl IntoIterator<Item = u32>) -> PeerPolicy {
        let mut policy = PeerPolicy::same_user();
        for uid in uids {
            if !policy.uids.contains(&uid) {
                policy.uids.push(uid);
            }
        }
        policy
    }

    /// Whether a peer of `uid` is allowed.
    pub fn allows(&self, uid: u32) -> bool {
        self.uids.contains(&uid)
    }

    /// The allowed user ids.
    pub fn uids(&self) -> &[u32] {
        &self.uids
    }
}

impl Default for PeerPolicy {
    fn default() -> Self {
        PeerPolicy::same_user()
    }
}

/// A listening endpoint with an abstract-namespace name (no file to clean up).
pub struct Listener {
    fd: OwnedFd,
    name: String,
    policy: PeerPolicy,
}

impl Listener {
    /// Listens on `name` (abstract namespace), accepting peers of this user only.
    pub fn bind(name: &str) -> Result<Listener> {
        Listener::bind_with(name, PeerPolicy::same_user())
    }

    /// Listens on `name`, accepting peers that `policy` allows.
    pub fn bind_with(name: &str, policy: PeerPolicy) -> Result<Listener> {
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
            policy,
        })
    }

    /// Listens on a fresh name made of this process's pid and a counter, accepting peers of
    /// this user only.
    pub fn bind_unique() -> Result<Listener> {
        Listener::bind_unique_with(PeerPolicy::same_user())
    }

    /// Listens on a fresh name, accepting peers that `policy` allows.
    pub fn bind_unique_with(policy: PeerPolicy) -> Result<Listener> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let me = sycl_backend::ipc::ExporterId::current();
        let name = format!(
            "sycl-rs-{}-{:x}-{}",
            me.pid,
            me.nonce,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Listener::bind_with(&name, policy)
    }

    /// The name to pass to [`Channel::connect`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for the next connection of an allowed peer, at most `timeout` (`None`: forever).
    /// Connections of peers the policy does not allow are closed at once (they receive
    /// nothing) and waiting goes on; if the time runs out, the error says how many were
    /// refused.
    pub fn accept(&self, timeout: Option<Duration>) -> Result<Channel> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut refused: Vec<PeerCredentials> = Vec::new();
        loop {
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                let mut fds = [rustix::event::PollFd::new(
                    &self.fd,
                    rustix::event::PollFlags::IN,
                )];
                let ts = rustix::event::Timespec::try_from(left)
                    .map_err(|_| Error::invalid("timeout too large"))?;
                let n = rustix::event::poll(&mut fds, Some(&ts)).map_err(|e| os_err("poll", e))?;
                if n == 0 {
                    let also = if refused.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; refused {} connection(s) of users not allowed: {:?}",
                            refused.len(),
                            refused
                        )
                    };
                    return Err(Error::new(
                        Errc::Runtime,
                        format!(
                            "no allowed rank connected to `{}` within {:?}{also}",
                            self.name,
                            timeout.unwrap_or_default()
                        ),
                    ));
                }
            }
            let fd = rustix::net::accept_with(&self.fd, SocketFlags::CLOEXEC)
                .map_err(|e| os_err("accept", e))?;
            let peer = PeerCredentials::of(&fd)?;
            if self.policy.allows(peer.uid) {
                return Ok(Channel { fd });
            }
            log::warn!(
                "sycl-rs: refused a connection to `{}` from pid {} of uid {} (allowed: {:?})",
                self.name,
                peer.pid,
                peer.uid,
                self.policy.uids
            );
            refused.push(peer);
        }
    }
}

/// One end of a rank channel.
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// Connects to a [`Listener`] by name, if it belongs to this user.
    pub fn connect(name: &str) -> Result<Channel> {
        Channel::connect_with(name, PeerPolicy::same_user())
    }

    /// Connects to a [`Listener`] by name, if `policy` allows its user.
    ///
    /// Errors: `Errc::Invalid` when the listener's user is not allowed (another user bound
    /// the name first): nothing was sent to it.
    pub fn connect_with(name: &str, policy: PeerPolicy) -> Result<Channel> {
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
        let peer = PeerCredentials::of(&fd)?;
        if !policy.allows(peer.uid) {
            return Err(Error::invalid(format!(
                "the listener `{name}` belongs to uid {} (pid {}), which is not allowed \
                 (allowed: {:?})",
                peer.uid, peer.pid, policy.uids
            )));
        }
        Ok(Channel { fd })
    }

    /// The credentials of the process at the other end.
    pub fn peer_credentials(&self) -> Result<PeerCredentials> {
        PeerCredentials::of(&self.fd)
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

    /// Sends `handle` with its descriptors: the ones it carries (received through a channel),
    /// or, for the handle `get` returned, the export's own.
    ///
    /// Errors: `Errc::Invalid` for an export that was put or whose object was freed, and for a
    /// handle made from bytes (it has no descriptors to send).
    pub fn send_handle(&self, handle: &Handle) -> Result<()> {
        handle.with_fds_for_sending(|fds| self.send_tagged(TAG_HANDLE, handle.as_bytes(), fds))
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
    ///
    /// # Safety
    /// `fd` is an open descriptor that this process owns and that nothing else will use or
    /// close from now on (one inherited from the parent, named on the command line, say): the
    /// channel closes it when dropped. A number that is not open, or not a seqpacket socket, is
    /// refused without being closed; one that is open but owned elsewhere cannot be told apart,
    /// hence this contract.
    ///
    /// ```compile_fail,E0133
    /// let ch = sycl::ipc::transport::Channel::from_inherited_fd(3);
    /// ```
    pub unsafe fn from_inherited_fd(fd: RawFd) -> Result<Channel> {
        if fd < 0 {
            return Err(Error::invalid("negative descriptor"));
        }
        // SAFETY: the number is only borrowed for the checks below; the caller guarantees it
        // is open and ours (a number that is not open fails the checks).
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let ok = rustix::net::sockopt::socket_type(borrowed)
            .map(|t| t == SocketType::SEQPACKET)
            .unwrap_or(false);
        if !ok {
            return Err(Error::invalid(format!(
                "descriptor {fd} is not a rank channel"
            )));
        }
        // SAFETY: an open seqpacket socket that the caller gives us to own (# Safety).
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
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
