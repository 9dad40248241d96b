"""The AV pacer: one 30 fps grid for audio and display (explicit clock, jittered calls)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from cozmo_driver.anim.av_pacer import AVPacer
from cozmo_driver.anim.clip import AudioKeyframe, Clip, FaceKeyframe, LiftKeyframe, Tracks, synthesize
from cozmo_driver.face.expressions import EXPRESSIONS
from cozmo_driver.face.procedural import FaceRenderer
from cozmo_driver.protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME, decode_ulaw
from cozmo_driver.protocol.display import decode_display
from cozmo_driver.protocol.errors import LocalProtocolError

R = FaceRenderer()
AUDIO = ("OutputAudio", "OutputSilence")


def count(msgs, *names) -> int:
    return sum(x.NAME in names for x in msgs)


def run(pacer: AVPacer, t0: float, t1: float, step: float = 1 / 30, jitter: float = 0.0, seed: int = 0):
    """Tick from t0 to t1 (inclusive) with calls every ``step`` +- ``jitter``; returns (time, messages) pairs."""
    rng = random.Random(seed)
    out = []
    t = t0
    while t <= t1:
        out.append((t, pacer.tick(t)))
        t += max(0.0, step + rng.uniform(-jitter, jitter))
    if out[-1][0] < t1:
        out.append((t1, pacer.tick(t1)))
    return out


def bars(k: int) -> np.ndarray:
    img = np.zeros((32, 128), dtype=bool)
    img[:, k % 128] = True
    return img


# --------------------------------------------------------------------------- one clock, no drift

def test_ten_minutes_of_jittered_calls_give_exactly_30_audio_messages_per_second():
    pacer = AVPacer(always_on=True)
    rng = random.Random(1)
    t0 = 1234.5678
    t = t0
    total = 0
    per_second = {}
    late_calls = 0
    while t < t0 + 600.0:
        msgs = pacer.tick(t)
        n = count(msgs, *AUDIO)
        total += n
        per_second[int(t - t0)] = per_second.get(int(t - t0), 0) + n
        # calls every 1/30 s +- 12 ms, sometimes 150-400 ms late (a stalled executor)
        if rng.random() < 0.002:
            t += rng.uniform(0.15, 0.4)
            late_calls += 1
        else:
            t += 1 / 30 + rng.uniform(-0.012, 0.012)
        if rng.random() < 0.01:   # audio keeps arriving in odd-sized chunks
            pacer.queue_audio(np.full(rng.randrange(100, 5000), 1000, dtype=np.int16))
    end = t0 + 600.0
    total += count(pacer.tick(end), *AUDIO)
    assert abs(total - (math.floor(600.0 * 30) + 1)) <= 1
    # no drift: every whole second in the middle carried 30 (+-1 around a stall: a catch-up may straddle)
    middle = [per_second[s] for s in range(10, 590)]
    assert sum(middle) in range(580 * 30 - 15, 580 * 30 + 16)
    assert late_calls > 0 and pacer.stats.underruns > late_calls
    assert pacer.stats.ticks == total


def test_ticks_follow_the_origin_not_the_calls():
    pacer = AVPacer(always_on=True)
    pacer.start(0.0)
    got = 0
    for k in range(3000):
        got += count(pacer.tick(k / 30 + 0.0333), *AUDIO)     # always called 0.3 ms before the next slot
    assert got == math.floor((2999 / 30 + 0.0333) * 30) + 1
    assert pacer.stats.underruns == 0


def test_underruns_count_late_ticks_and_audio_is_never_dropped():
    pacer = AVPacer()
    tone = synthesize("tone(500, 1.0)")
    pacer.queue_audio(tone)
    first = pacer.tick(0.0)
    assert count(first, "OutputAudio") == 1
    late = pacer.tick(0.5)                          # 15 ticks at once
    assert count(late, "OutputAudio") == 15
    assert pacer.stats.underruns == 14
    rest = []
    for k in range(16, 60):
        rest += pacer.tick(k / 30)
    assert count(first + late + rest, "OutputAudio") == math.ceil(len(tone) / SAMPLES_PER_FRAME)
    pcm = np.concatenate([decode_ulaw(x.samples) for x in first + late + rest if x.NAME == "OutputAudio"])
    assert np.abs(pcm[: len(tone)].astype(int) - tone).max() < 600     # in order, nothing lost


# --------------------------------------------------------------------------- audio

def test_audio_then_silence_while_lingering_then_nothing():
    pacer = AVPacer(linger_s=0.5)
    assert pacer.tick(0.0) == []                    # idle: no traffic at all
    pacer.queue_audio(synthesize("tone(440, 0.2)"))
    ticks = [pacer.tick(k / 30) for k in range(1, 60)]
    kinds = [[x.NAME for x in t] for t in ticks]
    n_audio = math.ceil(round(0.2 * SAMPLE_RATE) / SAMPLES_PER_FRAME)
    assert kinds[:n_audio] == [["OutputAudio"]] * n_audio
    assert kinds[n_audio:n_audio + 15] == [["OutputSilence"]] * 15     # 0.5 s of silence
    assert all(k == [] for k in kinds[n_audio + 15:])
    assert pacer.audio_queued_s == 0


def test_any_rate_is_resampled_and_stereo_mixed():
    pacer = AVPacer()
    t = np.arange(48000) / 48000
    stereo = np.stack([10000 * np.sin(2 * np.pi * 1000 * t)] * 2, axis=1).astype(np.int16)
    pacer.queue_audio(stereo, rate=48000)
    assert pacer.audio_queued_s == pytest.approx(1.0, abs=1e-3)
    msgs = [x for k in range(40) for x in pacer.tick(k / 30)]
    assert count(msgs, "OutputAudio") == 30
    pcm = np.concatenate([decode_ulaw(x.samples) for x in msgs if x.NAME == "OutputAudio"])
    spectrum = np.abs(np.fft.rfft(pcm[1000:20000] * np.hanning(19000)))
    assert np.argmax(spectrum) * SAMPLE_RATE / 19000 == pytest.approx(1000, abs=5)
    with pytest.raises(LocalProtocolError):
        pacer.queue_audio(np.zeros(10, dtype=np.float32))


def test_streamed_parts_wait_for_more_and_count_starvation():
    pacer = AVPacer()
    pacer.queue_audio(np.full(1000, 500, dtype=np.int16), final=False)
    a = pacer.tick(0.0)
    b = pacer.tick(1 / 30)                          # 256 samples left, more to come: wait
    assert [x.NAME for x in a] == ["OutputAudio"] and [x.NAME for x in b] == ["OutputSilence"]
    assert pacer.stats.audio_starved == 1
    pacer.queue_audio(np.full(1000, 500, dtype=np.int16), final=True)
    c = pacer.tick(2 / 30)
    d = pacer.tick(3 / 30)
    e = pacer.tick(4 / 30)
    assert [x.NAME for x in c + d + e] == ["OutputAudio", "OutputAudio", "OutputSilence"]
    assert decode_ulaw(d[0].samples)[1256 - 744:].max() == 0            # the final tail is padded


# --------------------------------------------------------------------------- display

def test_face_layer_is_sent_when_it_changes_and_refreshed():
    pacer = AVPacer(linger_s=0.1, refresh_s=2.0)
    pacer.set_face(R.render(EXPRESSIONS["happy"]))
    first = pacer.tick(0.0)
    assert [x.NAME for x in first] == ["OutputSilence", "DisplayImage"]   # audio first (firmware)
    assert np.array_equal(decode_display(first[1].image), R.render_display(EXPRESSIONS["happy"]))
    quiet = [x for k in range(1, 59) for x in pacer.tick(k / 30)]
    assert count(quiet, "DisplayImage") == 0 and count(quiet, *AUDIO) == 3       # the linger only
    refresh = pacer.tick(2.0)
    assert [x.NAME for x in refresh] == ["OutputSilence", "DisplayImage"] and pacer.stats.refreshes == 1
    pacer.set_face(R.render(EXPRESSIONS["sad"]))
    same = pacer.tick(2.0 + 1 / 30)
    assert count(same, "DisplayImage") == 1
    pacer.set_face(R.render(EXPRESSIONS["sad"]))      # identical image: not sent again
    assert count(pacer.tick(2.0 + 2 / 30), "DisplayImage") == 0


def test_timed_images_revert_to_the_face():
    pacer = AVPacer(linger_s=0.0)
    face = R.render(EXPRESSIONS["neutral"])
    pacer.set_face(face)
    pacer.tick(0.0)
    pacer.show_image(bars(3), duration_s=1.0)
    shown = {}
    for k in range(1, 60):
        for x in pacer.tick(k / 30):
            if x.NAME == "DisplayImage":
                shown[k] = decode_display(x.image)
    assert sorted(shown) == [1, 31]
    assert np.array_equal(shown[1], bars(3))
    assert np.array_equal(shown[31], face[0::2])


def test_video_frames_one_per_tick_and_dropped_when_late():
    pacer = AVPacer()
    for k in range(10):
        pacer.show_image(bars(k))
    got = [decode_display(x.image) for k in range(5) for x in pacer.tick(k / 30) if x.NAME == "DisplayImage"]
    assert len(got) == 5 and all(np.array_equal(g, bars(i)) for i, g in enumerate(got))
    late = pacer.tick(9 / 30)                          # ticks 5..9 at once: only the newest frame
    frames = [x for x in late if x.NAME == "DisplayImage"]
    assert len(frames) == 1 and np.array_equal(decode_display(frames[0].image), bars(9))
    assert count(late, *AUDIO) == 5
    assert pacer.stats.display_dropped == 4
    assert pacer.images_queued == 1
    pacer.clear_images()
    assert pacer.images_queued == 0


def test_images_are_checked():
    pacer = AVPacer()
    with pytest.raises(LocalProtocolError):
        pacer.show_image(np.zeros((10, 10), dtype=bool))
    with pytest.raises(LocalProtocolError):
        pacer.show_image(bytes(2000))
    with pytest.raises(LocalProtocolError):
        pacer.show_image(bars(0), duration_s=-1)
    pacer.show_image(b"\x3f\x3f")                      # encoded bytes pass through
    assert [x.NAME for x in pacer.tick(0.0)] == ["OutputSilence", "DisplayImage"]


# --------------------------------------------------------------------------- animations on the same grid

def test_a_clip_plays_on_the_pacers_grid_and_the_face_returns():
    pacer = AVPacer(always_on=True)
    face = R.render(EXPRESSIONS["neutral"])
    pacer.set_face(face)
    pacer.queue_audio(synthesize("tone(300, 2.0)"))
    clip = Clip("c", 1.0, Tracks(face=[FaceKeyframe(0, EXPRESSIONS["joy"])],
                                 audio=[AudioKeyframe(0, synthesize("tone(900, 0.5)"))]))
    log = []
    t = 10.0
    for k in range(150):
        now = t + k / 30 + 0.004
        if k == 30:
            pacer.play_clip(clip, now)
        log.append(pacer.tick(now))
    per_tick = [count(msgs, *AUDIO) for msgs in log]
    assert per_tick == [1] * 150                        # one audio message per tick throughout
    flat = [x for msgs in log for x in msgs]
    assert count(flat, "StartAnimation") == 1 and count(flat, "EndAnimation") == 1
    start = next(i for i, msgs in enumerate(log) if any(x.NAME == "StartAnimation" for x in msgs))
    end = next(i for i, msgs in enumerate(log) if any(x.NAME == "EndAnimation" for x in msgs))
    assert start == 31 and end == start + 29             # the 30 ticks of the clip, on the grid
    after = [x for msgs in log[end + 1:] for x in msgs if x.NAME == "DisplayImage"]
    assert np.array_equal(decode_display(after[0].image), face[0::2])    # the face comes back
    # the queued tone waited during the clip and went on afterwards
    own_audio = [x for msgs in log[:start] + log[end + 1:] for x in msgs if x.NAME == "OutputAudio"]
    assert len(own_audio) == 60
    assert pacer.player.stats.clips_finished == 1


def test_cancelling_a_clip_returns_the_stop_messages_and_the_pacer_carries_on():
    pacer = AVPacer(always_on=True)
    pacer.set_face(bars(5))
    pacer.tick(0.0)
    pacer.play_clip(Clip("c", 2.0, Tracks(face=[FaceKeyframe(0, EXPRESSIONS["sad"])])), 0.01)
    during = pacer.tick(1 / 30) + pacer.tick(2 / 30)
    assert count(during, "StartAnimation") == 1 and count(during, *AUDIO) == 2
    out = pacer.cancel_clip(0.07)
    assert [x.NAME for x in out] == ["AbortAnimation"] and not pacer.animating
    after = pacer.tick(3 / 30)
    assert [x.NAME for x in after] == ["OutputSilence", "DisplayImage"]     # the face again, same grid
    assert np.array_equal(decode_display(after[1].image), bars(5))
    assert pacer.cancel_clip(0.2) == []


def test_a_clip_without_a_face_shows_the_face_layer_until_its_first_face_keyframe():
    """A clip hid the face layer from its first tick, though it had no face of its own yet:
    the face shown before stayed frozen (blinks, gaze) for the whole of a head or lift
    clip, every loop, and the face node's frames counted as covered. Now the face layer's
    frames go out in the clip's ticks (after their audio message, before EndAnimation) until
    the clip shows a face of its own; from then on they are covered, also in the loops after
    (``next_loop``), and the newest shows when the clip ends."""
    pacer = AVPacer(always_on=True)
    lift_only = Clip("lift_only", None, Tracks(lift=[LiftKeyframe(0, 1000, 90)]))   # 30 ticks
    later_face = Clip("later_face", None, Tracks(lift=[LiftKeyframe(0, 1000, 90)],
                                                 face=[FaceKeyframe(500, EXPRESSIONS["joy"])]))
    t0 = 5.0
    # after the tick of these: the clip from the next one (as AVStream plays a goal's loops)
    plays = {10: (lift_only, False), 40: (lift_only, True), 70: (later_face, False), 100: (later_face, True)}
    ticks = []
    for k in range(150):
        now = t0 + k / 30 + 0.004
        pacer.queue_face(bars(k))          # a face node's frame every tick, each a new one
        ticks.append(pacer.tick(now))
        if k in plays:
            assert not pacer.animating
            clip, again = plays[k]
            pacer.play_clip(clip, now, **({"next_loop": True} if again else {}))
    shown = {}
    for k, msgs in enumerate(ticks):
        names = [x.NAME for x in msgs]
        assert count(msgs, *AUDIO) == 1 and names[0] in AUDIO, (k, names)
        if "DisplayImage" in names:
            at = names.index("DisplayImage")
            assert "EndAnimation" not in names[:at], (k, names)      # before the clip's end
            shown[k] = decode_display(msgs[at].image)
    # the lift clip and its loop (ticks 11..70): every face frame, on its own tick
    assert all(np.array_equal(shown[k], bars(k)) for k in range(11, 71)), sorted(shown)
    # the clip with a face from 500 ms: the face layer for its first 15 ticks, then its own
    assert all(np.array_equal(shown[k], bars(k)) for k in range(71, 86))
    joy = R.render_display(EXPRESSIONS["joy"])
    assert np.array_equal(shown[86], joy)
    # its second loop keeps it (sent again at its keyframe), then the newest face
    assert [k for k in range(87, 131) if k in shown] == [116] and np.array_equal(shown[116], joy)
    assert np.array_equal(shown[131], bars(131))
    assert pacer.stats.faces_covered == 131 - 86
    assert pacer.player.stats.clips_finished == 4


def test_next_deadline():
    pacer = AVPacer(linger_s=0.0, refresh_s=1.0)
    assert pacer.next_deadline() is None
    pacer.start(0.0)
    assert pacer.next_deadline() is None                 # idle: nothing to wake up for
    pacer.queue_audio(np.ones(744, dtype=np.int16))
    assert pacer.next_deadline() == 0.0
    pacer.tick(0.0)
    pacer.set_face(bars(1))
    assert pacer.next_deadline() == pytest.approx(1 / 30)
    pacer.tick(1 / 30)
    assert pacer.next_deadline() == pytest.approx(31 / 30)   # the refresh


def test_after_a_long_idle_the_grid_resumes_now_without_a_burst():
    """Ticked at its deadlines (as a driver does), then idle for minutes: new audio starts at
    the current tick, one frame per tick, and nothing counts as late."""
    pacer = AVPacer(linger_s=0.5, refresh_s=5.0)
    pacer.start(0.0)
    pacer.queue_audio(np.full(3 * SAMPLES_PER_FRAME, 1000, dtype=np.int16))
    deadline = pacer.next_deadline()
    while deadline is not None:
        pacer.tick(deadline)
        deadline = pacer.next_deadline()
    pacer.queue_audio(np.full(2 * SAMPLES_PER_FRAME, 1000, dtype=np.int16))
    first = pacer.tick(600.0)
    assert [x.NAME for x in first] == ["OutputAudio"]
    assert pacer.next_deadline() == pytest.approx(600.0 + 1 / 30)
    assert [x.NAME for x in pacer.tick(600.0 + 1 / 30)] == ["OutputAudio"]
    assert pacer.stats.underruns == 0
    # and a face set while idle is shown at once, on the same grid
    while pacer.next_deadline() is not None:
        pacer.tick(pacer.next_deadline())
    pacer.set_face(bars(3))
    at = 1234.5
    assert [x.NAME for x in pacer.tick(at)] == ["OutputSilence", "DisplayImage"]
    assert pacer.next_deadline() == pytest.approx(math.floor(at * 30 + 1e-9) / 30 + 1 / 30)
    assert pacer.stats.underruns == 0


def test_forget_screen_sends_the_face_again():
    pacer = AVPacer(linger_s=0.0)
    pacer.set_face(bars(1))
    assert count(pacer.tick(0.0), "DisplayImage") == 1
    assert pacer.tick(1 / 30) == []
    pacer.forget_screen()
    assert count(pacer.tick(2 / 30), "DisplayImage") == 1


def test_paused_and_resumed_the_grid_goes_on_from_now_with_the_newest_face():
    """pause() (the robot lost, the driver deactivated) with face frames waiting and within
    the linger, face frames while paused, resume() 8 h later: the next tick is the current
    one, not late, and shows the newest face; the night's ticks are not worked through."""
    pacer = AVPacer(linger_s=0.5, face_queue=6)
    pacer.start(0.0)
    for k in range(3):
        pacer.queue_face(bars(k))
        pacer.tick(k / 30)
    for k in range(3, 7):
        pacer.queue_face(bars(k))                        # four wait
    pacer.pause()
    assert pacer.faces_queued == 0
    for k in range(7, 20):
        pacer.queue_face(bars(k))                        # no tick to show them on
    assert pacer.faces_queued == 0
    assert (pacer.stats.faces_dropped, pacer.stats.faces_covered) == (0, 0)
    emitted = []
    emit = pacer._emit
    pacer._emit = lambda k, latest, out: (emitted.append(k), emit(k, latest, out))
    at = 8 * 3600.0 + 0.01
    pacer.resume(at)
    out = pacer.tick(at + 0.02)
    assert [x.NAME for x in out] == ["OutputSilence", "DisplayImage"]
    assert decode_display(out[1].image).tolist() == bars(19).tolist()
    assert emitted == [math.floor(at * 30)] and pacer.stats.underruns == 0
    pacer.queue_face(bars(20))                           # queued again, one per tick
    pacer.queue_face(bars(21))
    assert pacer.faces_queued == 2
    nxt = pacer.next_deadline()
    assert nxt == pytest.approx(math.floor(at * 30) / 30 + 1 / 30)
    shown = [count(pacer.tick(nxt), "DisplayImage"), count(pacer.tick(nxt + 1 / 30), "DisplayImage")]
    assert shown == [1, 1] and pacer.stats.underruns == 0
