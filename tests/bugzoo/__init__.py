"""The bug zoo: realistic bugs planted in a scratch copy of the tree to measure the hunt."""
