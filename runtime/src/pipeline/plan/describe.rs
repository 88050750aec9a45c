//! Describing a step (see the module above): the stage instances, their streams and their
//! resolved buffer references, checked as the generated code adds them.

use super::*;

/// A buffer reference of one stage instance, resolved when the step was described: the
/// element of a buffer array (0 for a plain buffer) and the range of its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ref {
    /// The buffer (its index among the pipeline's buffers).
    pub buffer: usize,
    /// Whether the statement writes it.
    pub write: bool,
    /// Index into a buffer array; 0 for a plain buffer.
    pub element: usize,
    /// The first element.
    pub start: usize,
    /// One past the last element.
    pub end: usize,
}

impl Ref {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether it covers no element.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// One stage instance of a described step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instance {
    /// The stage's index among every stage the pipeline declares (its template).
    pub template: usize,
    /// The stage's name.
    pub name: &'static str,
    /// The loop variable of the instance, for stages inside `for`.
    pub index: Option<usize>,
    /// The declared stream (index among the `streams` declarations).
    pub decl: usize,
    /// The element of the stream array (0 for a single stream).
    pub lane: usize,
    /// The stream slot: declarations and their elements numbered in order.
    pub stream: usize,
    /// The buffer references of its statements, in the order they appear.
    pub refs: Vec<Ref>,
    pub(super) accesses: Vec<Access>,
    /// For each of `accesses`, what a read reads of its elements.
    pub(super) read_kinds: Vec<ReadKind>,
    /// Where control statements and their bodies start and end: before the access of each
    /// index (`accesses.len()`: after the last).
    pub(super) marks: Vec<(usize, Mark)>,
    pub(super) after: Vec<(usize, bool)>,
    /// Where the current statement's references start in `refs` (while describing).
    statement: usize,
}

impl Instance {
    /// The loop variable, 0 outside loops.
    pub fn i(&self) -> usize {
        self.index.unwrap_or(0)
    }

    /// `load[3]`, or `load` outside loops.
    pub fn label(&self) -> String {
        match self.index {
            Some(i) => format!("{}[{i}]", self.name),
            None => self.name.to_owned(),
        }
    }
}

/// One `concurrent(...)` claim: the stages it names, and whether it sits inside a `for`
/// (then it claims the named stages of one iteration concurrent).
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// The named stages, by template.
    pub stages: &'static [usize],
    /// Whether the claim is inside the loop of the stages it names.
    pub per_iteration: bool,
}

/// The builder of a step's description; see the module docs.
#[derive(Debug)]
pub struct Describe {
    pipeline: &'static str,
    counts: Vec<usize>,
    offsets: Vec<usize>,
    stages: Vec<Instance>,
    scratch: Vec<ScratchDecl>,
    /// What the reads being described read of the elements they name.
    read_kind: ReadKind,
    /// The next access, a write, first reads every element it writes
    /// ([`Describe::reads_what_it_writes`]).
    reads_first: bool,
}

/// Which bodies of a control statement surely run, for the check that scratch buffers are
/// written first: what a body writes counts after the statement only where every run makes
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodiesRun {
    /// Maybe none: an `if` without `else`, a `while`, a `switch` (a value past its last
    /// case runs none).
    MaybeNone,
    /// Exactly one of them: an `if` with an `else`.
    OneOf,
    /// The one body, at least once: a `do ... while`.
    Always,
}

/// Where a control statement's parts start among an instance's accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Mark {
    /// A control statement starts (its condition comes first).
    Control(BodiesRun),
    /// One of its bodies starts.
    Body,
    /// It ends.
    End,
}

/// What a read described by [`Describe::touch`] or [`Describe::touch_whole`] reads of the
/// elements it names, for the check that scratch buffers are written first
/// (`plan/coverage.rs`): that check refuses only what surely reads elements nothing wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ReadKind {
    /// Some of them, or all, as the callee decides: a kernel's window (it may index only
    /// below its bound), a `call`'s or host closure's declared reads. Refused only when none
    /// of them was written.
    #[default]
    Within,
    /// Every one of them: a copy's source, a communication operand (sent, reduced or
    /// gathered whole).
    Every,
    /// The first: a `while`, `if` or `switch` condition.
    First,
    /// The first, after the rest of the statement: a `do ... while`'s condition.
    FirstAfterBody,
}

/// A scratch device buffer of the step, whose reads must follow writes of the same elements
/// (see `plan/coverage.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ScratchDecl {
    pub(super) buffer: usize,
    pub(super) name: &'static str,
    pub(super) len: usize,
    /// A zero of its element type as a `fill` writes it (`0.0`), for the message.
    pub(super) zero: &'static str,
}

/// The key of one buffer (or element of a buffer array) for the ordering analysis.
pub(super) fn buffer_key(buffer: usize, element: usize) -> BufferId {
    BufferId(buffer.wrapping_mul(1 << 32).wrapping_add(element))
}

impl Describe {
    /// A description of a step of `pipeline`, whose declared streams are `streams`: each
    /// one's name, the expression of its count as written (empty for a single stream) and
    /// its count (1 for a single stream).
    pub fn new(
        pipeline: &'static str,
        streams: &[(&'static str, &'static str, usize)],
    ) -> Result<Describe> {
        let mut offsets = Vec::with_capacity(streams.len());
        let mut counts = Vec::with_capacity(streams.len());
        let mut total = 0usize;
        for &(name, expression, count) in streams {
            if count == 0 {
                return Err(Error::invalid(
                    "pipeline step",
                    format!(
                        "pipeline `{pipeline}`: stream array `{name}` has no streams (its count, \
                         `{expression}`, is 0); give it at least one"
                    ),
                ));
            }
            counts.push(count);
            offsets.push(total);
            total = total.saturating_add(count);
        }
        Ok(Describe {
            pipeline,
            counts,
            offsets,
            stages: Vec::new(),
            scratch: Vec::new(),
            read_kind: ReadKind::Within,
            reads_first: false,
        })
    }

    /// Declares buffer `buffer` a scratch device buffer named `name`, of `len` elements
    /// (`zero` a zero of its element type, as a `fill` writes it): the plan refuses a step
    /// that reads elements of it nothing wrote before.
    pub fn scratch(&mut self, buffer: usize, name: &'static str, len: usize, zero: &'static str) {
        self.scratch.push(ScratchDecl {
            buffer,
            name,
            len,
            zero,
        });
    }

    /// What the reads described next read of the elements they name (until the next call;
    /// [`ReadKind::Within`] at first).
    pub fn read_kind(&mut self, kind: ReadKind) {
        self.read_kind = kind;
    }

    /// The next access described, a write, reads every element it writes first: an in-place
    /// `all_reduce` reduces (a `broadcast` on its root sends) what the buffer holds. One
    /// reference of the statement, so no overlap with itself; a read for the check that
    /// scratch buffers are written first.
    pub fn reads_what_it_writes(&mut self) {
        self.reads_first = true;
    }

    /// The read [`Describe::reads_what_it_writes`] asked for, before `write` is pushed.
    fn read_first(&mut self, write: &Access) -> Result<()> {
        if !std::mem::take(&mut self.reads_first) || write.mode != Mode::Write {
            return Ok(());
        }
        let stage = self.current()?;
        stage.read_kinds.push(ReadKind::Every);
        stage.accesses.push(Access {
            mode: Mode::Read,
            ..*write
        });
        Ok(())
    }

    /// A control statement of the current stage starts: its condition's access comes next,
    /// then each body after [`Describe::body`], then [`Describe::end_control`].
    pub fn control(&mut self, runs: BodiesRun) -> Result<()> {
        self.mark(Mark::Control(runs))
    }

    /// The next body of the current control statement starts.
    pub fn body(&mut self) -> Result<()> {
        self.mark(Mark::Body)
    }

    /// The current control statement ends.
    pub fn end_control(&mut self) -> Result<()> {
        self.mark(Mark::End)
    }

    fn mark(&mut self, mark: Mark) -> Result<()> {
        let stage = self.current()?;
        let at = stage.accesses.len();
        stage.marks.push((at, mark));
        Ok(())
    }

    fn error(&self, message: String) -> Error {
        Error::invalid(
            "pipeline step",
            format!("pipeline `{}`: {message}", self.pipeline),
        )
    }

    fn current(&mut self) -> Result<&mut Instance> {
        let pipeline = self.pipeline;
        self.stages.last_mut().ok_or_else(|| {
            Error::invalid(
                "pipeline step",
                format!("pipeline `{pipeline}`: an access before any stage (a bug)"),
            )
        })
    }

    /// Starts the next stage instance: stage `template` (`name`), iteration `index` of its
    /// loop if any, on element `lane` of stream declaration `decl` (`stream_name` for
    /// messages).
    pub fn stage(
        &mut self,
        template: usize,
        name: &'static str,
        index: Option<usize>,
        decl: usize,
        stream_name: &'static str,
        lane: usize,
    ) -> Result<()> {
        let count = self.counts.get(decl).copied().unwrap_or(0);
        if lane >= count {
            let label = match index {
                Some(i) => format!("{name}[{i}]"),
                None => name.to_owned(),
            };
            return Err(self.error(format!(
                "stage `{label}` runs on `{stream_name}[{lane}]`, but `{stream_name}` has {count} stream(s)"
            )));
        }
        let stream = self.offsets[decl] + lane;
        self.stages.push(Instance {
            template,
            name,
            index,
            decl,
            lane,
            stream,
            refs: Vec::new(),
            accesses: Vec::new(),
            read_kinds: Vec::new(),
            marks: Vec::new(),
            after: Vec::new(),
            statement: 0,
        });
        Ok(())
    }

    /// Starts the next statement of the current stage: the references it makes must not
    /// overlap where one of them is written (a kernel's pointer parameters are `__restrict__`,
    /// and a copy's source and destination must be apart).
    pub fn statement(&mut self) -> Result<()> {
        let stage = self.current()?;
        stage.statement = stage.refs.len();
        Ok(())
    }

    /// A reference of the current stage to buffer `buffer` (`name` for messages): element
    /// `element` of an array of `elements` buffers (`None` for a plain buffer), elements
    /// `start..end` of a buffer of `len` (a bound left out means the buffer's start or end),
    /// read or written. Returns the number of elements it names.
    #[allow(clippy::too_many_arguments)]
    pub fn touch(
        &mut self,
        buffer: usize,
        name: &'static str,
        element: Option<(usize, usize)>,
        start: Option<usize>,
        end: Option<usize>,
        len: usize,
        write: bool,
    ) -> Result<usize> {
        let label = self.current()?.label();
        let element = match element {
            Some((index, elements)) => {
                if index >= elements {
                    return Err(self.error(format!(
                        "stage `{label}` uses `{name}[{index}]`, but `{name}` holds {elements} buffer(s)"
                    )));
                }
                index
            }
            None => 0,
        };
        let (start, end) = (start.unwrap_or(0), end.unwrap_or(len));
        if start > end || end > len {
            let longer = if self.scratch.iter().any(|s| s.buffer == buffer) {
                format!("declare scratch buffer `{name}` longer")
            } else {
                "pass a longer buffer".to_owned()
            };
            return Err(self.error(format!(
                "stage `{label}` uses elements {start}..{end} of `{name}`, which holds {len}; \
                 the range must lie within `{name}`, its start at most its end: change the \
                 params, `let`s or loop bounds it is computed from, or {longer}"
            )));
        }
        let stage = self.current()?;
        let clash = stage.refs[stage.statement.min(stage.refs.len())..]
            .iter()
            .find(|r| {
                r.buffer == buffer
                    && r.element == element
                    && (r.write || write)
                    && r.start < end
                    && start < r.end
            })
            .copied();
        if let Some(other) = clash {
            return Err(self.error(format!(
                "stage `{label}` passes elements {}..{} and {start}..{end} of `{name}` to one \
                 statement, and one of them is written: they overlap",
                other.start, other.end
            )));
        }
        let access = Access {
            buffer: buffer_key(buffer, element),
            mode: if write { Mode::Write } else { Mode::Read },
            extent: Some(Extent::new(start as u64, end as u64)),
        };
        self.read_first(&access)?;
        let read_kind = self.read_kind;
        let stage = self.current()?;
        stage.refs.push(Ref {
            buffer,
            write,
            element,
            start,
            end,
        });
        stage.read_kinds.push(read_kind);
        stage.accesses.push(access);
        Ok(end - start)
    }

    /// A `copy` of the current stage from `src_len` elements of `src` into `dst_len` of
    /// `dst`: refused, before anything of the step runs, unless the two are one length.
    pub fn copy_lengths(
        &mut self,
        src: &str,
        src_len: usize,
        dst: &str,
        dst_len: usize,
    ) -> Result<()> {
        if src_len == dst_len {
            return Ok(());
        }
        let label = self.current()?.label();
        Err(self.error(format!(
            "stage `{label}` copies {src_len} element(s) of `{src}` into {dst_len} of `{dst}`; \
             a copy's two sides are one length: take ranges of one length \
             (`copy {src}[lo..hi] -> {dst}[at..at + (hi - lo)]`)"
        )))
    }

    /// An access of the current stage to a whole buffer that no statement passes as a view
    /// (a `call`'s or a host closure's declared `reads`/`writes`, a flag).
    pub fn touch_whole(&mut self, buffer: usize, write: bool) -> Result<()> {
        let access = Access {
            buffer: buffer_key(buffer, 0),
            mode: if write { Mode::Write } else { Mode::Read },
            extent: None,
        };
        self.read_first(&access)?;
        let read_kind = self.read_kind;
        let stage = self.current()?;
        stage.read_kinds.push(read_kind);
        stage.accesses.push(access);
        Ok(())
    }

    /// `after template`: the current stage runs after that stage's instance of the same
    /// iteration (`same_iteration`), or after every instance of it.
    pub fn after(&mut self, template: usize, same_iteration: bool) -> Result<()> {
        self.current()?.after.push((template, same_iteration));
        Ok(())
    }

    /// The finished description. Nothing is scheduled yet.
    pub fn finish(self) -> Description {
        let streams = self.counts.iter().sum();
        Description {
            pipeline: self.pipeline,
            streams,
            stages: self.stages,
            scratch: self.scratch,
        }
    }
}

/// A described step: what [`StepPlan::new`] schedules, and what a pipeline compares with the
/// description of its cached plan.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Description {
    pub(super) pipeline: &'static str,
    pub(super) streams: usize,
    pub(super) stages: Vec<Instance>,
    pub(super) scratch: Vec<ScratchDecl>,
}
