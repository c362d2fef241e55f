"""The live runtime: a ZeroMQ coordinator and client processes on real clocks, one machine or many, with
emulated devices and links; `launcher` starts a whole run on one machine, `slots` hosts many devices per
process."""
