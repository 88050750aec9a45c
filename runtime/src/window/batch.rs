//! A stage's window signals to and from several neighbours at once: on CUDA one batch of
//! stream memory operations per call (one mem-op node in a captured step) instead of one per
//! neighbour and per word; on the CPU backend the single signals one after another.

use bytemuck::Pod;

use super::{LocalSignals, PeerSignals, Window, free_word, mixed, ready_word};
use crate::cuda::SignalOp;
use crate::error::Result;
use crate::stream::{Stream, StreamBackend};

impl<T: Pod> Window<T> {
    /// [`Window::wait_read`] from each of `peers`, in order.
    pub(crate) fn wait_read_all(&self, stream: &Stream, peers: &[usize]) -> Result<()> {
        self.wait_all(stream, peers, free_word, Self::wait_read)
    }

    /// [`Window::wait_written`] from each of `peers`, in order.
    pub(crate) fn wait_written_all(&self, stream: &Stream, peers: &[usize]) -> Result<()> {
        self.wait_all(
            stream,
            peers,
            |_, peer| ready_word(peer),
            Self::wait_written,
        )
    }

    /// [`Window::signal_written`] to each of `peers`, in order.
    pub(crate) fn signal_written_all(&self, stream: &Stream, peers: &[usize]) -> Result<()> {
        self.signal_all(stream, peers, ready_word(self.rank), Self::signal_written)
    }

    /// [`Window::signal_read`] to each of `peers`, in order.
    pub(crate) fn signal_read_all(&self, stream: &Stream, peers: &[usize]) -> Result<()> {
        let word = free_word(self.size, self.rank);
        self.signal_all(stream, peers, word, Self::signal_read)
    }

    /// Waits for this rank's word `word(size, peer)` of each of `peers` to be 1, clearing each
    /// once seen: one batch on CUDA, `single` per peer otherwise.
    fn wait_all(
        &self,
        stream: &Stream,
        peers: &[usize],
        word: impl Fn(usize, usize) -> usize,
        single: fn(&Self, &Stream, usize) -> Result<()>,
    ) -> Result<()> {
        const CALL: &str = "Window::wait_read/wait_written";
        match (&self.signals, stream.kind()) {
            (LocalSignals::Cuda(words), StreamBackend::Cuda(s)) if peers.len() > 1 => {
                self.check_stream(CALL, stream)?;
                let mut ops = Vec::with_capacity(2 * peers.len());
                for &peer in peers {
                    self.index(CALL, peer)?;
                    let offset = word(self.size, peer);
                    ops.push(SignalOp::WaitEq {
                        memory: words,
                        offset,
                        value: 1,
                    });
                    ops.push(SignalOp::Write {
                        memory: words,
                        offset,
                        value: 0,
                    });
                }
                s.signal_ops(&ops)
            }
            (LocalSignals::Cuda(_), StreamBackend::Cpu(_))
            | (LocalSignals::Cpu(_), StreamBackend::Cuda(_)) => Err(mixed(CALL, self.size)),
            _ => peers.iter().try_for_each(|&p| single(self, stream, p)),
        }
    }

    /// Sets word `word` of each of `peers`' signal words to 1: one batch on CUDA, `single` per
    /// peer otherwise.
    fn signal_all(
        &self,
        stream: &Stream,
        peers: &[usize],
        word: usize,
        single: fn(&Self, &Stream, usize) -> Result<()>,
    ) -> Result<()> {
        const CALL: &str = "Window::signal_written/signal_read";
        let s = match stream.kind() {
            StreamBackend::Cuda(s) if peers.len() > 1 => s,
            _ => return peers.iter().try_for_each(|&p| single(self, stream, p)),
        };
        self.check_stream(CALL, stream)?;
        let mut ops = Vec::with_capacity(peers.len());
        for &peer in peers {
            match &self.peers[self.index(CALL, peer)?].signals {
                PeerSignals::Cuda(memory) => ops.push(SignalOp::Write {
                    memory,
                    offset: word,
                    value: 1,
                }),
                PeerSignals::Cpu(_) => return Err(mixed(CALL, self.size)),
            }
        }
        s.signal_ops(&ops)
    }
}
