//! Ping-pong loops: a device loop whose body swaps two buffers, unrolled by two halves
//! (`K0 -> WHILE(body 0 -> Kmid -> IF(body 1) -> Kend)`, then `Kodd -> IF(copy back)` after
//! it), so that no copy runs per iteration.

use super::*;

impl Graph {
    /// Starts a ping-pong loop (a loop whose body swaps buffers, unrolled by two) in `scope`
    /// after `dependencies`: `K0 -> WHILE(hw)` (no `K0` for a do-while at the top of the
    /// graph, whose handle starts each launch at 1; in a body, one that sets it to 1). Returns the WHILE node, the scope of its body (where body 0 goes),
    /// its handle, and the arguments for the rest ([`Graph::ping_pong_middle`],
    /// [`Graph::ping_pong_end`], [`Graph::ping_pong_after`]).
    pub(crate) fn ping_pong_start(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        first_test: bool,
        args: &mut ConditionArgs,
        keep: Vec<Keep>,
    ) -> Result<(NodeRef, usize, sys::CUgraphConditionalHandle)> {
        const CALL: &str = "Graph::add_ping_pong_while_node";
        let d = self.handle.ctx.bind()?;
        if d.version < CONDITIONAL_DRIVER {
            return Err(unsupported(d.version));
        }
        let target = self.scope_raw(CALL, scope)?;
        self.own(CALL, dependencies)?;
        self.retain(keep);
        let module = condition_module(&self.handle.ctx)?;
        self.retain([Keep::Object(module.clone())]);
        self.add_counter(args)?;
        let args = *args;
        let (handle, deps) = if first_test {
            let handle = self.condition_handle(scope, 0, false)?;
            let k0 = self.add_condition_kernel(
                scope,
                dependencies,
                &module,
                handle,
                &args,
                Role::Generic(FIRST),
            )?;
            (handle, vec![k0])
        } else {
            let handle = self.condition_handle(scope, 1, true)?;
            let deps = self.restart_do_while(scope, dependencies, &module, handle, args.counter)?;
            (handle, deps)
        };
        let (node, bodies) = self.conditional_node(target, &deps, handle, Form::While, 1)?;
        Ok((node, bodies[0], handle))
    }

    /// The middle of a ping-pong body, after body 0: `Kmid -> IF`, the IF's handle set by the
    /// loop's condition (counting the iteration). Returns the IF node and its body's scope
    /// (where body 1 goes).
    pub(crate) fn ping_pong_middle(
        &mut self,
        body: usize,
        args: &ConditionArgs,
    ) -> Result<(NodeRef, usize)> {
        const CALL: &str = "Graph::add_ping_pong_while_node";
        let target = self.scope_raw(CALL, body)?;
        let module = condition_module(&self.handle.ctx)?;
        let sinks = self.sinks(body)?;
        let handle = self.condition_handle(body, 0, false)?;
        let k = self.add_condition_kernel(body, &sinks, &module, handle, args, Role::Generic(0))?;
        let (node, bodies) = self.conditional_node(target, &[k], handle, Form::If, 1)?;
        Ok((node, bodies[0]))
    }

    /// The end of a ping-pong body, after its IF: `Kend`, which decides the next iteration (or
    /// stops, without counting, when the middle test stopped the loop).
    pub(crate) fn ping_pong_end(
        &mut self,
        body: usize,
        middle: NodeRef,
        handle: sys::CUgraphConditionalHandle,
        args: &ConditionArgs,
    ) -> Result<()> {
        let module = condition_module(&self.handle.ctx)?;
        self.add_condition_kernel(
            body,
            &[middle],
            &module,
            handle,
            args,
            Role::Generic(AFTER_MIDDLE),
        )?;
        Ok(())
    }

    /// After a ping-pong loop: `Kodd -> IF`, the IF running when the loop's last run made an
    /// odd number of iterations (`args.counter`'s second word). Returns the IF node and its
    /// body's scope.
    pub(crate) fn ping_pong_after(
        &mut self,
        scope: usize,
        looping: NodeRef,
        args: &ConditionArgs,
    ) -> Result<(NodeRef, usize)> {
        const CALL: &str = "Graph::add_ping_pong_while_node";
        let target = self.scope_raw(CALL, scope)?;
        let module = condition_module(&self.handle.ctx)?;
        let handle = self.condition_handle(scope, 0, false)?;
        let odd = ConditionArgs {
            kind: ConditionKind::Every,
            value: args.counter + 4,
            threshold: 2,
            op: 1,
            state: 0,
            counter: 0,
            max_iterations: u32::MAX,
        };
        let k = self.add_condition_kernel(
            scope,
            &[looping],
            &module,
            handle,
            &odd,
            Role::Generic(FIRST | DECIDE_ONLY),
        )?;
        let (node, bodies) = self.conditional_node(target, &[k], handle, Form::If, 1)?;
        Ok((node, bodies[0]))
    }
}
