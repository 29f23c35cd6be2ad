// SIGTERM/SIGINT handling for the daemons: block them in every thread (call before starting
// any), then wait for one on the main thread and shut down in order.
//
//   BlockTerminationSignals();
//   ... start threads and servers ...
//   int sig = WaitForTerminationSignal();   // returns SIGTERM or SIGINT
#ifndef STAGEFRONTIER_DAEMON_COMMON_TERMINATION_SIGNALS_H_
#define STAGEFRONTIER_DAEMON_COMMON_TERMINATION_SIGNALS_H_

namespace stagefrontier {

// Blocks SIGTERM and SIGINT in the calling thread and the threads it starts later.
void BlockTerminationSignals();
// Waits until SIGTERM or SIGINT arrives; returns it.
int WaitForTerminationSignal();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_TERMINATION_SIGNALS_H_
