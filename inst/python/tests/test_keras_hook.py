import gc

from customgrad import _keras_hook


def test_freezing_moves_what_python_holds_out_of_the_collector():
    gc.unfreeze()
    try:
        tracked = len(gc.get_objects())
        _keras_hook.freeze_imported()
        assert gc.get_freeze_count() > tracked / 2  # Keras, its backend
        assert len(gc.get_objects()) < tracked / 10
    finally:
        gc.unfreeze()


def test_install_keeps_the_choice_to_freeze():
    try:
        _keras_hook.install(freeze=False)
        assert _keras_hook._freeze == [False]
        _keras_hook.install()
        assert _keras_hook._freeze == [True]
    finally:
        _keras_hook._freeze[0] = True
