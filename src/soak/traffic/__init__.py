"""Real traffic: client queries read from a pcap or a dnstap stream, and soak's own
compact capture file that a replay (soak.load.replay) plays back.

Below the load package: pure parsing and file formats, no sockets to a server
(dnstap.py listens on a local Frame Streams socket the server writes to).
docs/replay.md says what a user sees.
"""
