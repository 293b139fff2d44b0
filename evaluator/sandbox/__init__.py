"""Starting isolated processes and the limits they run under: the zygote's launcher, bubblewrap, Landlock, the seccomp filter, the process tree, the build jail.
"""
