//! Reading big-endian fields off a byte slice, for the cluster's own formats (the
//! broker-to-broker frame, the replica state file): a read past the end is the format's
//! own error, never a panic.

pub(super) struct Cursor<'a, E> {
    rest: &'a [u8],
    /// What a read past the end returns.
    short: E,
}

impl<'a, E: Clone> Cursor<'a, E> {
    pub(super) fn new(bytes: &'a [u8], short: E) -> Self {
        Cursor { rest: bytes, short }
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], E> {
        let (head, rest) = self.rest.split_at_checked(n).ok_or_else(|| self.short.clone())?;
        self.rest = rest;
        Ok(head)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], E> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
}
