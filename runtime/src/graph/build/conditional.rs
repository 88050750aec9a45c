//! Conditional nodes (`if`, `if`/`else`, `while`, do-while, switch, ping-pong loops and
//! kernel-set conditions) as the graph builder adds them: each body built in its own scope,
//! then closed with its condition (a CUDA condition kernel, or the CPU runner's test).

use super::*;

impl Graph {
    /// Adds a conditional node of `form` with `count` bodies to `scope`, body `n` built by
    /// `body(n, ..)`; `max_iterations` bounds a loop. A body that fails (or panics) leaves the
    /// graph unusable: it refuses further nodes and instantiation, since a half-built loop
    /// could never end.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_conditional_in(
        &mut self,
        call: &'static str,
        scope: u32,
        dependencies: &[GraphNode],
        condition: Condition,
        form: cpu::Form,
        count: usize,
        max_iterations: u32,
        body: &mut dyn FnMut(usize, &mut GraphBody<'_>) -> Result<()>,
    ) -> Result<(GraphNode, LoopState)> {
        let target = self.scope_of(call, scope)?;
        let deps = self.deps(call, scope, dependencies)?;
        condition.check(call, &self.ctx)?;
        let is_loop = matches!(form, cpu::Form::While | cpu::Form::DoWhile);
        if is_loop && max_iterations == 0 {
            return Err(Error::invalid(
                call,
                "a loop needs a maximum of at least 1 iteration",
            ));
        }
        if count == 0 {
            return Err(Error::invalid(call, "a switch needs at least one case"));
        }
        let max = if is_loop { max_iterations } else { u32::MAX };
        let kernel_set = match &condition.test {
            Test::Kernel {
                owner: Some(owner), ..
            } => Some(owner.clone()),
            _ => None,
        };
        if let Some(owner) = &kernel_set {
            kernel_set_fits(call, owner, self.id, scope, form, max_iterations)?;
        }
        let state = match kernel_set.as_ref().and_then(|o| o.state.as_ref()) {
            Some(state) => state.relabeled(&condition),
            None => LoopState::new(&self.ctx, condition.label(), max)?.in_stage(condition.stage),
        };
        // Adds the node with empty bodies; returns the bodies' scopes and how to close them.
        let (node, inner, close) = match (&mut self.backend, target, deps) {
            (GraphBackend::Cuda(g), Scope::Cuda(at), Deps::Cuda(deps))
                if let Some(owner) = &kernel_set =>
            {
                // The kernel sets the handle: no condition kernel, but the value's words and
                // the state stay with the graph. Drivers before 12.8 decide an `else` or a
                // switch from the word with the library's kernels.
                let words = Condition {
                    test: match &condition.test {
                        Test::Kernel { alloc, offset, .. } => Test::Value {
                            alloc: alloc.clone(),
                            offset: *offset,
                            len: 1,
                        },
                        _ => return Err(Error::invalid(call, "a kernel-set condition")),
                    },
                    label: None,
                    stage: None,
                };
                let (mut args, keep) = cuda_condition(call, &words, &state, max)?;
                let added = g.add_kernel_set_conditional(
                    at, &deps, form, count, owner.raw, &mut args, keep,
                )?;
                let inner = added.bodies.into_iter().map(Scope::Cuda).collect();
                (NodeId::Cuda(added.node), inner, Close::Cuda(None))
            }
            (GraphBackend::Cuda(g), Scope::Cuda(at), Deps::Cuda(deps)) => {
                let (mut args, keep) = cuda_condition(call, &condition, &state, max)?;
                let added = g.add_conditional(at, &deps, form, count, &mut args, keep)?;
                let close = added.close.map(|(body, handle)| (body, handle, args));
                let inner = added.bodies.into_iter().map(Scope::Cuda).collect();
                (NodeId::Cuda(added.node), inner, Close::Cuda(close))
            }
            (GraphBackend::Cpu(g), Scope::Cpu(path), Deps::Cpu(deps)) => {
                let test = cpu_condition(call, &condition)?;
                let FlagStorage::Cpu(word) = state.storage() else {
                    return Err(mixed(call, "loop state"));
                };
                let label = condition.label();
                let index =
                    g.add_conditional(&path, &deps, &label, form, count, test, max, word.clone())?;
                let inner = (0..count)
                    .map(|n| {
                        let mut inner = path.clone();
                        inner.extend([index, n]);
                        Scope::Cpu(inner)
                    })
                    .collect();
                (NodeId::Cpu(index), inner, Close::Cpu(path, index))
            }
            _ => return Err(mixed(call, "graph")),
        };
        // Every body's scope first, so that a kernel-set handle knows where it may be set from
        // before any body is built.
        let scopes: Vec<Scope> = inner;
        let mut body_scopes = Vec::with_capacity(scopes.len());
        for inner in scopes {
            self.scopes.push(inner);
            body_scopes.push((self.scopes.len() - 1) as u32);
        }
        if let Some(owner) = &kernel_set {
            *owner
                .bodies
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(body_scopes.clone());
        }
        let built = catch_unwind(AssertUnwindSafe(|| {
            for (n, body_scope) in body_scopes.into_iter().enumerate() {
                body(
                    n,
                    &mut GraphBody {
                        graph: self,
                        scope: body_scope,
                    },
                )?;
            }
            Ok(())
        }));
        let closed = match built {
            Ok(Ok(())) => match (&mut self.backend, close) {
                (GraphBackend::Cuda(g), Close::Cuda(Some((body, handle, args)))) => {
                    g.close_while_body(body, handle, &args)
                }
                (GraphBackend::Cpu(g), Close::Cpu(path, index)) => {
                    Ok(g.seal_conditional(&path, index)?)
                }
                _ => Ok(()),
            },
            Ok(Err(e)) => Err(e),
            Err(panic) => {
                self.broken = true;
                resume_unwind(panic)
            }
        };
        if let Err(e) = closed {
            self.broken = true;
            return Err(e);
        }
        if is_loop {
            self.loops.push(state.clone());
        }
        Ok((self.made(scope, GraphNodeType::CONDITIONAL, node), state))
    }
}

impl Graph {
    /// Adds a ping-pong loop to `scope` (see `add_ping_pong_while_node`): the CUDA form is
    /// built in steps, each body filled as soon as its scope exists. A body that fails (or
    /// panics) leaves the graph unusable, as for the other conditional nodes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_ping_pong_in(
        &mut self,
        call: &'static str,
        scope: u32,
        dependencies: &[GraphNode],
        condition: Condition,
        first_test: bool,
        max_iterations: u32,
        body: &mut dyn FnMut(usize, &mut GraphBody<'_>) -> Result<()>,
    ) -> Result<(GraphNode, LoopState)> {
        let target = self.scope_of(call, scope)?;
        let deps = self.deps(call, scope, dependencies)?;
        condition.check(call, &self.ctx)?;
        if matches!(condition.test, Test::Kernel { .. }) {
            return Err(Error::invalid(
                call,
                "a loop whose body swaps buffers is decided by a comparison (`Condition::compare`) \
                 or a value, which the library tests after each half of the unrolled body; a \
                 kernel-set condition would need two handles",
            ));
        }
        if max_iterations == 0 {
            return Err(Error::invalid(
                call,
                "a loop needs a maximum of at least 1 iteration",
            ));
        }
        let state =
            LoopState::new(&self.ctx, condition.label(), max_iterations)?.in_stage(condition.stage);
        let built = catch_unwind(AssertUnwindSafe(|| -> Result<NodeId> {
            let mut fill = |graph: &mut Graph, inner: Scope, n: usize| -> Result<()> {
                graph.scopes.push(inner);
                let body_scope = (graph.scopes.len() - 1) as u32;
                body(
                    n,
                    &mut GraphBody {
                        graph,
                        scope: body_scope,
                    },
                )
            };
            match (&mut self.backend, target, deps) {
                (GraphBackend::Cuda(g), Scope::Cuda(at), Deps::Cuda(deps)) => {
                    let (mut args, keep) =
                        cuda_condition(call, &condition, &state, max_iterations)?;
                    let (node, body0, handle) =
                        g.ping_pong_start(at, &deps, first_test, &mut args, keep)?;
                    fill(self, Scope::Cuda(body0), 0)?;
                    let GraphBackend::Cuda(g) = &mut self.backend else {
                        return Err(mixed(call, "graph"));
                    };
                    let (middle, body1) = g.ping_pong_middle(body0, &args)?;
                    fill(self, Scope::Cuda(body1), 1)?;
                    let GraphBackend::Cuda(g) = &mut self.backend else {
                        return Err(mixed(call, "graph"));
                    };
                    g.ping_pong_end(body0, middle, handle, &args)?;
                    let (after, body2) = g.ping_pong_after(at, node, &args)?;
                    fill(self, Scope::Cuda(body2), 2)?;
                    Ok(NodeId::Cuda(after))
                }
                (GraphBackend::Cpu(g), Scope::Cpu(path), Deps::Cpu(deps)) => {
                    let test = cpu_condition(call, &condition)?;
                    let FlagStorage::Cpu(word) = state.storage() else {
                        return Err(mixed(call, "loop state"));
                    };
                    let form = if first_test {
                        cpu::Form::PingPong
                    } else {
                        cpu::Form::DoPingPong
                    };
                    let label = condition.label();
                    let index = g.add_conditional(
                        &path,
                        &deps,
                        &label,
                        form,
                        3,
                        test,
                        max_iterations,
                        word.clone(),
                    )?;
                    for n in 0..3 {
                        let mut inner = path.clone();
                        inner.extend([index, n]);
                        fill(self, Scope::Cpu(inner), n)?;
                    }
                    let GraphBackend::Cpu(g) = &mut self.backend else {
                        return Err(mixed(call, "graph"));
                    };
                    g.seal_conditional(&path, index)?;
                    Ok(NodeId::Cpu(index))
                }
                _ => Err(mixed(call, "graph")),
            }
        }));
        let node = match built {
            Ok(Ok(node)) => node,
            Ok(Err(e)) => {
                self.broken = true;
                return Err(e);
            }
            Err(panic) => {
                self.broken = true;
                resume_unwind(panic)
            }
        };
        self.loops.push(state.clone());
        Ok((self.made(scope, GraphNodeType::CONDITIONAL, node), state))
    }
}

/// Checks that a kernel-set handle `owner` may decide a node of `form` in `scope` of graph
/// `graph`: its own scope, the kind it was made for, the same maximum, and no node yet.
fn kernel_set_fits(
    call: &'static str,
    owner: &Owner,
    graph: u64,
    scope: u32,
    form: cpu::Form,
    max_iterations: u32,
) -> Result<()> {
    if owner.graph != graph || owner.scope != scope {
        return Err(Error::invalid(
            call,
            "the condition handle was made by another graph or body; make it with \
             `condition_handle` of the graph or body the node is added to",
        ));
    }
    let fits = match (form, owner.kind) {
        (cpu::Form::While, HandleKind::While { max_iterations: m })
        | (cpu::Form::DoWhile, HandleKind::DoWhile { max_iterations: m }) => {
            if m != max_iterations {
                return Err(Error::invalid(
                    call,
                    format!(
                        "the condition handle was made for a loop of at most {m} iterations, \
                         and the node is given {max_iterations}; give both the same maximum"
                    ),
                ));
            }
            true
        }
        (cpu::Form::If | cpu::Form::IfElse | cpu::Form::Switch, HandleKind::Decision) => true,
        _ => false,
    };
    if !fits {
        return Err(Error::invalid(
            call,
            format!(
                "the condition handle was made for {:?}, not for this kind of node (`While` \
                 for a while node, `DoWhile` for a do-while node, `Decision` for an if, \
                 if/else or switch node)",
                owner.kind
            ),
        ));
    }
    if owner
        .bodies
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_some()
    {
        return Err(Error::invalid(
            call,
            "the condition handle decides another node already; a handle decides one node",
        ));
    }
    Ok(())
}

impl Graph {
    /// A handle for a conditional node that kernels set, made in `scope`.
    pub(super) fn condition_handle_in(
        &mut self,
        scope: u32,
        kind: HandleKind,
    ) -> Result<ConditionHandle> {
        const CALL: &str = "Graph::condition_handle";
        let target = self.scope_of(CALL, scope)?;
        let state = match kind {
            HandleKind::While { max_iterations } | HandleKind::DoWhile { max_iterations } => {
                if max_iterations == 0 {
                    return Err(Error::invalid(
                        CALL,
                        "a loop needs a maximum of at least 1 iteration",
                    ));
                }
                Some(LoopState::new(
                    &self.ctx,
                    "a kernel-set condition".to_owned(),
                    max_iterations,
                )?)
            }
            HandleKind::Decision => None,
        };
        let raw = match (&mut self.backend, target) {
            (GraphBackend::Cuda(g), Scope::Cuda(at)) => match kind {
                // A do-while's body runs first: its handle starts each launch at 1.
                HandleKind::DoWhile { .. } => g.condition_handle(at, 1, true)?,
                _ => g.condition_handle(at, 0, false)?,
            },
            (GraphBackend::Cpu(_), Scope::Cpu(_)) => 0,
            _ => return Err(mixed(CALL, "graph")),
        };
        let handle = ConditionHandle::owned(&self.ctx, self.id, scope, raw, kind, state)?;
        // Its words are being zeroed on the legacy stream: the graph waits for that before it
        // is instantiated.
        if let GraphBackend::Cuda(g) = &self.backend {
            g.zeroed_on_legacy();
        }
        Ok(handle)
    }
}

/// How a conditional node's body is finished once filled.
enum Close {
    /// A CUDA `while` body gets its condition kernel (body, handle, arguments).
    Cuda(Option<(usize, sys::CUgraphConditionalHandle, cuda::ConditionArgs)>),
    /// A CPU-backend node recomputes what it touches (parent path, index).
    Cpu(Vec<usize>, usize),
}

/// The condition kernel's arguments, and what the graph must keep for them.
fn cuda_condition(
    call: &'static str,
    condition: &Condition,
    state: &LoopState,
    max: u32,
) -> Result<(cuda::ConditionArgs, Vec<cuda::Keep>)> {
    let FlagStorage::Cuda(state_word) = state.storage() else {
        return Err(mixed(call, "loop state"));
    };
    let mut keep = vec![cuda::Keep::Object(state_word.clone())];
    let region = condition.test.region();
    let (kind, value, threshold, op) = match &condition.test {
        Test::Compare {
            kind,
            comparison,
            threshold,
            ..
        } => {
            let range = region
                .and_then(|r| r.cuda())
                .ok_or_else(|| mixed(call, "condition's buffer"))?;
            keep.push(cuda::Keep::Device(range.memory.clone()));
            let kind = match kind {
                cpu::ValueKind::F32 => cuda::ConditionKind::F32,
                cpu::ValueKind::F64 => cuda::ConditionKind::F64,
                cpu::ValueKind::U32 => cuda::ConditionKind::U32,
            };
            (kind, range.ptr(), *threshold, comparison.code())
        }
        // A kernel-set condition's word (what the library's kernels read on drivers that
        // have no IF with two bodies or SWITCH).
        Test::Value { .. } | Test::Kernel { .. } => {
            let range = region
                .and_then(|r| r.cuda())
                .ok_or_else(|| mixed(call, "condition's buffer"))?;
            keep.push(cuda::Keep::Device(range.memory.clone()));
            (cuda::ConditionKind::Value, range.ptr(), 0, 0)
        }
        Test::Every {
            counter,
            modulus,
            remainder,
            ..
        } => {
            let FlagStorage::Cuda(word) = counter else {
                return Err(mixed(call, "counter"));
            };
            keep.push(cuda::Keep::Object(word.clone()));
            (
                cuda::ConditionKind::Every,
                word.device_address(),
                u64::from(*modulus),
                *remainder,
            )
        }
    };
    let args = cuda::ConditionArgs {
        kind,
        value,
        threshold,
        op,
        state: state_word.device_address(),
        counter: 0,
        max_iterations: max,
    };
    Ok((args, keep))
}

/// The CPU backend's form of a condition.
fn cpu_condition(call: &'static str, condition: &Condition) -> Result<cpu::Condition> {
    let region = condition.test.region();
    Ok(match &condition.test {
        Test::Compare {
            kind,
            comparison,
            threshold,
            ..
        } => {
            let range = region
                .and_then(|r| r.cpu())
                .ok_or_else(|| mixed(call, "condition's buffer"))?;
            cpu::Condition::Compare {
                memory: range.memory,
                offset: range.offset,
                kind: *kind,
                op: comparison.code(),
                threshold: *threshold,
            }
        }
        Test::Value { .. } | Test::Kernel { .. } => {
            let range = region
                .and_then(|r| r.cpu())
                .ok_or_else(|| mixed(call, "condition's buffer"))?;
            cpu::Condition::Value {
                memory: range.memory,
                offset: range.offset,
            }
        }
        Test::Every {
            counter,
            modulus,
            remainder,
            ..
        } => {
            let FlagStorage::Cpu(word) = counter else {
                return Err(mixed(call, "counter"));
            };
            cpu::Condition::Every {
                counter: word.clone(),
                modulus: *modulus,
                remainder: *remainder,
            }
        }
    })
}
