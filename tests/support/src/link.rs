//! A fault-injecting TCP proxy in front of each broker's cluster listener: the cluster's
//! voters are the proxies' addresses, so every broker-to-broker link runs through one. Each
//! connection's sender is read from its first frame (the cluster frame starts with its
//! sender's node id), so a fault can cut one node off from all its peers, in both
//! directions, while clients still reach it directly:
//!
//! - `Drop`: the node's links are closed and new ones closed at once;
//! - `BlackHole`: its links stay open but nothing crosses them (writes back up until the
//!   sender's write timeout), and they are closed when healed;
//! - `Delay`: every chunk crossing its links waits first.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Drop,
    BlackHole,
    Delay(Duration),
}

/// The fault in force, shared by every proxy of a cluster: (node cut off, how).
#[derive(Default)]
struct State {
    fault: Option<(i32, Fault)>,
    /// Grows at every change: links opened under an older one are closed when it matters.
    generation: u64,
}

#[derive(Clone, Default)]
pub struct Links(Arc<Mutex<State>>);

impl Links {
    /// Cuts `node` off from its peers in the way `fault` says.
    pub fn cut(&self, node: i32, fault: Fault) {
        let mut s = self.0.lock().unwrap();
        s.fault = Some((node, fault));
        s.generation += 1;
    }

    /// Ends the fault.
    pub fn heal(&self) {
        let mut s = self.0.lock().unwrap();
        s.fault = None;
        s.generation += 1;
    }

    /// The fault on a link from `from` to `to`, and the generation.
    fn on(&self, from: i32, to: i32) -> (Option<Fault>, u64) {
        let s = self.0.lock().unwrap();
        let f = s.fault.and_then(|(node, f)| (node == from || node == to).then_some(f));
        (f, s.generation)
    }

    /// Starts a proxy that forwards to node `to`'s cluster listener at `target`; returns
    /// the address peers should dial.
    pub fn proxy(&self, to: i32, target: SocketAddr) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a link proxy");
        let addr = listener.local_addr().unwrap();
        let links = self.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let links = links.clone();
                std::thread::spawn(move || links.serve(conn, to, target));
            }
        });
        addr
    }

    fn serve(&self, mut client: TcpStream, to: i32, target: SocketAddr) {
        // The frame's first 13 bytes: u32 length, u8 version, u64 sender.
        let mut head = [0u8; 13];
        if client.read_exact(&mut head).is_err() {
            return;
        }
        let from = u64::from_be_bytes(head[5..13].try_into().unwrap()) as i32;
        let (fault, generation) = self.on(from, to);
        if fault == Some(Fault::Drop) {
            return;
        }
        let Ok(mut server) = TcpStream::connect_timeout(&target, Duration::from_secs(1)) else { return };
        let _ = server.set_nodelay(true);
        if server.write_all(&head).is_err() {
            return;
        }
        let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let back = self.clone();
        std::thread::spawn(move || back.pump(s2, c2, from, to, generation));
        self.pump(client, server, from, to, generation);
    }

    /// Copies `src` to `dst` under the faults; closes both when the link must go.
    fn pump(&self, mut src: TcpStream, mut dst: TcpStream, from: i32, to: i32, opened: u64) {
        let _ = src.set_read_timeout(Some(Duration::from_millis(100)));
        let mut buf = vec![0u8; 64 * 1024];
        let mut held = false;
        loop {
            let (fault, generation) = self.on(from, to);
            match fault {
                Some(Fault::Drop) => break,
                Some(Fault::BlackHole) => {
                    held = true;
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                // A link held in a black hole is closed once healed: what it buffered is stale.
                _ if held && generation != opened => break,
                _ => {}
            }
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Some(Fault::Delay(d)) = fault {
                        std::thread::sleep(d);
                    }
                    if dst.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        let _ = src.shutdown(Shutdown::Both);
        let _ = dst.shutdown(Shutdown::Both);
    }
}
