"""Horovod's BroadcastGlobalVariablesHook for tf.compat.v1 sessions
(MonitoredTrainingSession): after the session is created, every global
variable takes root_rank's value."""
import tensorflow as tf

from byteps_native.tf import api


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device  # accepted: the op runs on the CPU
        self.bcast_op = None

    def begin(self):
        if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = api.broadcast_variables(tf.compat.v1.global_variables(), self.root_rank)

    def after_create_session(self, session, coord):
        if self.bcast_op is not None:
            session.run(self.bcast_op)
