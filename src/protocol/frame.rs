//! Request framing, in two steps (check, then parse): a frame is a 4-byte big-endian size
//! followed by that many bytes. `check` looks only at the prefix, so the size is validated
//! before any buffer is grown for it; an incomplete frame is a normal outcome.

/// Why a connection's byte stream cannot be framed; the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame size {size} is negative")]
    Negative { size: i32 },
    #[error("frame of {size} bytes exceeds socket.request.max.bytes ({max})")]
    TooLarge { size: u32, max: u32 },
}

/// What `check` found at the front of the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Not enough bytes yet; `needed` is the total the buffer must reach (prefix included),
    /// when known.
    Incomplete { needed: Option<usize> },
    /// A whole frame of `len` body bytes follows the 4-byte prefix.
    Complete { len: usize },
}

/// A frame too short for a request header is no framing error: after a v0 SaslHandshake a
/// frame is a bare SASL token, which may be that short (PLAIN's "\0u\0pw"); a request that
/// short is refused by `api::dispatch` (no header), closing the connection all the same.
pub fn check(buf: &[u8], max: u32) -> Result<Framing, FrameError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(Framing::Incomplete { needed: None });
    };
    let size = i32::from_be_bytes(prefix.try_into().expect("4 bytes"));
    if size < 0 {
        return Err(FrameError::Negative { size });
    }
    let size = size as u32;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    let total = 4 + size as usize;
    if buf.len() < total {
        return Ok(Framing::Incomplete { needed: Some(total) });
    }
    Ok(Framing::Complete { len: size as usize })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_until_the_whole_frame_is_there() {
        assert_eq!(check(&[0, 0], 100), Ok(Framing::Incomplete { needed: None }));
        let mut f = vec![0, 0, 0, 10];
        f.extend([0u8; 9]);
        assert_eq!(check(&f, 100), Ok(Framing::Incomplete { needed: Some(14) }));
        f.push(0);
        assert_eq!(check(&f, 100), Ok(Framing::Complete { len: 10 }));
    }

    #[test]
    fn sizes_are_checked_before_anything_is_allocated() {
        assert_eq!(
            check(&[0x7f, 0xff, 0xff, 0xff], 1024),
            Err(FrameError::TooLarge { size: i32::MAX as u32, max: 1024 })
        );
        assert_eq!(check(&[0xff, 0xff, 0xff, 0xff], 1024), Err(FrameError::Negative { size: -1 }));
        assert_eq!(check(&[0, 0, 0, 3, 1, 2, 3], 1024), Ok(Framing::Complete { len: 3 }), "a short SASL token");
    }
}
